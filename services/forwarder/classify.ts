/**
 * What a platform answer means, in one table (docs/platform.md, "Error classification"). Both the HTTP status and
 * the JSON `code` count: the platform answers most errors under HTTP 200 with a nonzero code.
 *
 * | answer                                              | kind      |
 * |-----------------------------------------------------|-----------|
 * | no answer (timeout, connection refused/reset)       | retry     |
 * | HTTP 408, 425, 429 or 5xx (whatever the body)       | retry     |
 * | body is not the JSON envelope (HTML, empty, no code)| retry     |
 * | code 0 under HTTP 2xx                               | ok        |
 * | code 0 under any other status                       | retry     |
 * | code 40100 (too many requests)                      | retry     |
 * | code 5xxxx (platform system error)                  | retry     |
 * | codes 40102 40104 40105 40107 40108 40114           | token     |
 * | any other code                                      | permanent |
 *
 * An unreadable answer is retried: the platform may have taken the batch and dedups resent event_ids, while a dead
 * letter would drop good conversions over a proxy's error page.
 */
import type { PlatformAnswer } from './platform-client.js';

/** Invalid, expired or revoked tokens (40108: refresh token invalid or rotated away, the OAuth invalid_grant). */
export const TOKEN_CODES: ReadonlySet<number> = new Set([40102, 40104, 40105, 40107, 40108, 40114]);
export const RATE_LIMIT_CODE = 40100;
/** Invalid parameters: the platform rejects the whole batch for one bad record, so the batch is split to find it. */
export const PER_RECORD_CODE = 40002;
const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([408, 425, 429]);

export type Classification =
  | { readonly kind: 'ok' }
  | { readonly kind: 'retry'; readonly reason: string; readonly retryAfterMs: number | null }
  | { readonly kind: 'token'; readonly reason: string }
  | {
      readonly kind: 'permanent';
      readonly reason: string;
      readonly code: number;
      readonly message: string;
      /** The rejection may concern one record of the batch: split it to isolate the bad one. */
      readonly perRecord: boolean;
    };

export function classify(a: PlatformAnswer): Classification {
  const retry = (reason: string): Classification => ({ kind: 'retry', reason, retryAfterMs: a.retryAfterMs });
  if (a.transportError) return retry(a.transportError);
  if (RETRYABLE_STATUSES.has(a.httpStatus) || a.httpStatus >= 500) return retry(`http_${a.httpStatus}`);
  if (a.code === null) return retry('unparseable');
  if (a.code === 0) return a.httpStatus >= 200 && a.httpStatus < 300 ? { kind: 'ok' } : retry(`http_${a.httpStatus}`);
  const reason = String(a.code);
  if (a.code === RATE_LIMIT_CODE || (a.code >= 50000 && a.code < 60000)) return retry(reason);
  if (TOKEN_CODES.has(a.code)) return { kind: 'token', reason };
  return { kind: 'permanent', reason, code: a.code, message: a.message, perRecord: a.code === PER_RECORD_CODE };
}

/** The metrics label of an answer: the platform code, or what happened instead. */
export function codeLabel(a: PlatformAnswer): string {
  if (a.transportError) return a.transportError;
  if (a.code === null) return `http_${a.httpStatus}`;
  return String(a.code);
}
