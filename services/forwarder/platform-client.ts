/**
 * The HTTP client of the advertising platform (operator contract, "The platform side"; modelled on the TikTok
 * Business API v1.3). It only talks and parses: every call resolves to a PlatformAnswer, never throws for what the
 * platform (or the network) did, and classify.ts alone decides what an answer means. Tokens go in headers and
 * bodies only; nothing here logs.
 */
import { z } from 'zod';
import { platformLatency } from './metrics.js';
import { ServiceError } from '../shared/errors.js';

export type PlatformEndpoint =
  | 'access_token'
  | 'refresh_token'
  | 'revoke_token'
  | 'advertiser_info'
  | 'event_track'
  | 'meta_token'
  | 'meta_pixel'
  | 'meta_events'
  | 'meta_revoke'
  | 'google_token'
  | 'google_revoke'
  | 'google_ingest';

export interface PlatformAnswer {
  readonly endpoint: PlatformEndpoint;
  /** 0 when no HTTP answer arrived (see transportError). */
  readonly httpStatus: number;
  readonly transportError: 'timeout' | 'network' | null;
  /** The JSON `code`; null when the body was not the platform's JSON envelope. */
  readonly code: number | null;
  /** The platform's message, or a short description of what came back instead. */
  readonly message: string;
  readonly requestId: string | null;
  readonly data: unknown;
  /** From a Retry-After header (seconds or HTTP date), when present and sane. */
  readonly retryAfterMs: number | null;
}

export interface PlatformClientOptions {
  readonly apiBase: string;
  readonly appId: string | undefined;
  readonly appSecret: string | undefined;
  readonly timeoutMs: number;
  /** Aborts every call in flight (shutdown). */
  readonly signal?: AbortSignal;
  readonly fetch?: typeof fetch;
  readonly now?: () => number;
}

export class PlatformNotConfiguredError extends ServiceError {
  constructor() {
    super('the platform app is not configured: set PLATFORM_APP_ID and PLATFORM_APP_SECRET');
  }
}

/** Retry-After is honoured up to this long; beyond it the answer is treated as a plain retryable one. */
const MAX_RETRY_AFTER_MS = 15 * 60_000;

export function parseRetryAfter(value: string | null, now: number): number | null {
  if (value === null) return null;
  const v = value.trim();
  if (/^\d+$/.test(v)) {
    const ms = Number(v) * 1000;
    return ms <= MAX_RETRY_AFTER_MS ? ms : MAX_RETRY_AFTER_MS;
  }
  // An HTTP date names its day and month (RFC 9110); bare numbers like "-1" or "1.5" are not dates.
  if (!/^[A-Za-z]{3}, /.test(v)) return null;
  const at = Date.parse(v);
  if (Number.isNaN(at)) return null;
  return Math.min(Math.max(0, at - now), MAX_RETRY_AFTER_MS);
}

/** What a body says in a log line when it is not the platform's envelope: short, one line. */
function snippet(text: string): string {
  const flat = text.replace(/<[^>]*>/g, ' ').replace(/\s+/g, ' ').trim();
  return flat.length > 120 ? `${flat.slice(0, 120)}…` : flat;
}

/**
 * An answer body as a JSON object, or, when it is none (a proxy's page, an empty body, an array), the answer that
 * says so: every platform's parser starts here.
 */
export function jsonObjectOf(text: string): { readonly object: Record<string, unknown> } | { readonly unread: ParsedAnswer } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { unread: { code: null, message: text.trim() === '' ? 'empty body' : `not JSON: ${snippet(text)}`, requestId: null, data: null } };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return { unread: { code: null, message: `not a JSON object: ${snippet(text)}`, requestId: null, data: null } };
  }
  return { object: parsed as Record<string, unknown> };
}

/** Parses an answer body into the envelope fields; tolerant of anything the network may hand back. */
export function parseEnvelope(text: string): ParsedAnswer {
  const read = jsonObjectOf(text);
  if ('unread' in read) return read.unread;
  const o = read.object;
  const code = typeof o.code === 'number' && Number.isSafeInteger(o.code) && o.code >= 0 ? o.code : null;
  const message = typeof o.message === 'string' ? o.message : code === null ? `no numeric code: ${snippet(text)}` : '';
  return {
    code,
    message,
    requestId: typeof o.request_id === 'string' ? o.request_id : null,
    data: o.data ?? null,
  };
}

export class PlatformClient {
  private readonly fetchImpl: typeof fetch;
  private readonly now: () => number;

  constructor(private readonly opts: PlatformClientOptions) {
    this.fetchImpl = opts.fetch ?? fetch;
    this.now = opts.now ?? Date.now;
  }

  get configured(): boolean {
    return this.opts.appId !== undefined && this.opts.appSecret !== undefined;
  }

  get appId(): string {
    if (!this.opts.appId) throw new PlatformNotConfiguredError();
    return this.opts.appId;
  }

  private appCredentials(): { app_id: string; secret: string } {
    if (!this.opts.appId || !this.opts.appSecret) throw new PlatformNotConfiguredError();
    return { app_id: this.opts.appId, secret: this.opts.appSecret };
  }

  exchangeCode(authCode: string, codeVerifier: string): Promise<PlatformAnswer> {
    return this.call('access_token', 'POST', '/oauth2/access_token/', {
      body: { ...this.appCredentials(), auth_code: authCode, code_verifier: codeVerifier },
    });
  }

  refresh(refreshToken: string): Promise<PlatformAnswer> {
    return this.call('refresh_token', 'POST', '/oauth2/refresh_token/', {
      body: { ...this.appCredentials(), refresh_token: refreshToken },
    });
  }

  revoke(accessToken: string): Promise<PlatformAnswer> {
    return this.call('revoke_token', 'POST', '/oauth2/revoke_token/', {
      body: { ...this.appCredentials(), access_token: accessToken },
    });
  }

  advertiserInfo(accessToken: string, advertiserIds: readonly string[]): Promise<PlatformAnswer> {
    const query = new URLSearchParams({ advertiser_ids: JSON.stringify(advertiserIds) });
    return this.call('advertiser_info', 'GET', `/advertiser/info/?${query}`, { accessToken });
  }

  track(accessToken: string, body: TrackBody): Promise<PlatformAnswer> {
    return this.call('event_track', 'POST', '/event/track/', { accessToken, body });
  }

  private call(endpoint: PlatformEndpoint, method: 'GET' | 'POST', path: string, opts: { body?: unknown; accessToken?: string }): Promise<PlatformAnswer> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    if (opts.accessToken !== undefined) headers['access-token'] = opts.accessToken;
    const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    return platformCall(endpoint, `${this.opts.apiBase}${path}`, { method, headers, body }, { ...this.opts, fetch: this.fetchImpl, now: this.now }, (text, status) =>
      withStatusWhenUnread(parseEnvelope(text), status),
    );
  }
}

/** An answer body read into the fields of a PlatformAnswer (each platform's own shape: parseEnvelope, Graph, Google). */
export type ParsedAnswer = Pick<PlatformAnswer, 'code' | 'message' | 'requestId' | 'data'>;

/** A body that is not the platform's JSON says so with its HTTP status (a proxy's error page, say). */
export function withStatusWhenUnread(p: ParsedAnswer, httpStatus: number): ParsedAnswer {
  return p.code === null ? { ...p, message: `HTTP ${httpStatus}, ${p.message}` } : p;
}

/**
 * One HTTP call to a platform, for every platform's client: the timeout (and the caller's abort), the latency
 * metric per endpoint and outcome, and an answer whatever happened: `parse` reads the body, no answer at all
 * becomes a transport error. Never throws for what the platform or the network did.
 */
export async function platformCall(
  endpoint: PlatformEndpoint,
  url: string,
  init: { readonly method: string; readonly headers: Record<string, string>; readonly body?: string | undefined },
  opts: { readonly timeoutMs: number; readonly signal?: AbortSignal | undefined; readonly fetch: typeof fetch; readonly now: () => number },
  parse: (text: string, httpStatus: number) => ParsedAnswer,
): Promise<PlatformAnswer> {
  const timeout = AbortSignal.timeout(opts.timeoutMs);
  const signal = opts.signal ? AbortSignal.any([timeout, opts.signal]) : timeout;
  const started = performance.now();
  const observe = (outcome: string): void => platformLatency.observe({ endpoint, outcome }, (performance.now() - started) / 1000);
  try {
    const res = await opts.fetch(url, { ...init, signal });
    const parsed = parse(await res.text(), res.status);
    observe(parsed.code === null ? `http_${res.status}` : String(parsed.code));
    return {
      endpoint,
      httpStatus: res.status,
      transportError: null,
      ...parsed,
      retryAfterMs: parseRetryAfter(res.headers.get('retry-after'), opts.now()),
    };
  } catch (err) {
    const timedOut = timeout.aborted || (err as Error)?.name === 'TimeoutError';
    observe(timedOut ? 'timeout' : 'network');
    return {
      endpoint,
      httpStatus: 0,
      transportError: timedOut ? 'timeout' : 'network',
      code: null,
      message: timedOut ? `no answer within ${opts.timeoutMs} ms` : `network error: ${(err as Error)?.message ?? String(err)}`,
      requestId: null,
      data: null,
      retryAfterMs: null,
    };
  }
}

export interface TrackBody {
  readonly event_source: string;
  readonly event_source_id: string;
  readonly test_event_code?: string;
  readonly data: readonly unknown[];
}

// ---------------------------------------------------------------- data of successful answers

const idList = z.array(z.union([z.string().min(1), z.number().int().nonnegative()])).transform((ids) => ids.map(String));

const tokenDataSchema = z.object({
  access_token: z.string().min(1),
  advertiser_ids: idList.default([]),
  scope: z.array(z.union([z.string(), z.number()])).transform((s) => s.map(String)).default([]),
  expires_in: z.number().nonnegative().optional(),
  refresh_token: z.string().min(1).optional(),
  refresh_token_expires_in: z.number().nonnegative().optional(),
});

export interface TokenGrant {
  readonly accessToken: string;
  readonly advertiserIds: readonly string[];
  readonly scope: readonly string[];
  /** Seconds; undefined = the access token does not expire. */
  readonly expiresIn: number | undefined;
  readonly refreshToken: string | undefined;
  readonly refreshExpiresIn: number | undefined;
}

/** The `data` of an access_token / refresh_token answer, or a description of what is wrong with it. */
export function parseTokenGrant(data: unknown): TokenGrant | string {
  const r = tokenDataSchema.safeParse(data);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    return `token answer is malformed: ${issue.path.join('.') || 'data'} ${issue.message}`;
  }
  return {
    accessToken: r.data.access_token,
    advertiserIds: r.data.advertiser_ids,
    scope: r.data.scope,
    expiresIn: r.data.expires_in,
    refreshToken: r.data.refresh_token,
    refreshExpiresIn: r.data.refresh_token_expires_in,
  };
}

function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

const advertiserInfoSchema = z.object({
  list: z
    .array(z.object({ advertiser_id: z.union([z.string(), z.number()]).transform(String), timezone: z.string().min(1) }))
    .min(1),
});

/** The time zone of an advertiser from an advertiser/info answer, or a description of what is wrong. */
export function parseAdvertiserTimeZone(data: unknown, advertiserId: string): string | { error: string } {
  const r = advertiserInfoSchema.safeParse(data);
  if (!r.success) return { error: 'advertiser answer is malformed: no list of advertisers with a timezone' };
  const entry = r.data.list.find((a) => a.advertiser_id === advertiserId) ?? r.data.list[0]!;
  if (!isTimeZone(entry.timezone)) return { error: `advertiser time zone is not an IANA name: ${entry.timezone.slice(0, 60)}` };
  return entry.timezone;
}
