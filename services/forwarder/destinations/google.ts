/**
 * The Google kind: Google's Data Manager API event ingestion (`POST {GOOGLE_API_BASE}/events:ingest`, at most 2,000
 * events a request) into a Google Ads conversion action, authorised by OAuth 2.0 with a refresh token (scope
 * `https://www.googleapis.com/auth/datamanager`). docs/decisions.md says why this API and not the Google Ads API's
 * click-conversion upload. Answers are `google.rpc.Status` errors; a refused request names the bad event in its
 * field violations (`events[3]…`), so that event is split off alone.
 */
import { z } from 'zod';
import type { PlatformEventRecord } from '../../domain/conversion.js';
import { ServiceError } from '../../shared/errors.js';
import type { Classification } from '../classify.js';
import { jsonObjectOf, platformCall, type ParsedAnswer, type PlatformAnswer, type PlatformEndpoint } from '../platform-client.js';
import { halves, type BatchGroup, type DestinationKind, type Outgoing } from './kind.js';
import { presentKeys, scoreMatch, type MatchScore, type MatchWeights } from './match-quality.js';

export const GOOGLE_BATCH_LIMIT = 2000;
export const GOOGLE_SCOPE = 'https://www.googleapis.com/auth/datamanager';

/** A `google` destination's setup: the Google Ads account the conversions go to, and its conversion action. */
export const googleSetupSchema = z
  .object({
    customer_id: z.string().regex(/^\d{10}$/, 'must be the Google Ads customer id: 10 digits, no dashes'),
    login_customer_id: z.string().regex(/^\d{10}$/, 'must be a manager account id: 10 digits').optional(),
    conversion_action_id: z.string().regex(/^\d{1,20}$/, 'must be the conversion action id: digits'),
    pii_mode: z.enum(['hashed', 'none']),
    test_event_code: z.string().min(1).max(64).optional(),
    events: z.array(z.object({ name: z.string().min(1).max(100), platform_event: z.string().min(1).max(100) }).strict()).min(1).max(200),
  })
  .strict();
export type GoogleSetup = z.infer<typeof googleSetupSchema>;

export class GoogleNotConfiguredError extends ServiceError {
  constructor() {
    super('the Google app is not configured: set GOOGLE_CLIENT_ID and GOOGLE_CLIENT_SECRET');
  }
}

export interface GoogleClientOptions {
  readonly apiBase: string;
  readonly tokenUrl: string;
  readonly revokeUrl: string;
  readonly clientId: string | undefined;
  readonly clientSecret: string | undefined;
  readonly timeoutMs: number;
  readonly fetch?: typeof fetch;
  readonly now?: () => number;
}

/**
 * A Google answer in the forwarder's terms: `code` 0 for success; for a `google.rpc.Status` its HTTP-like code,
 * for an OAuth error (token endpoint) the HTTP status, with the field violations or error description in the message.
 */
export function parseGoogleAnswer(text: string, httpStatus: number): ParsedAnswer {
  // An empty 2xx body is a success, not an unreadable answer.
  const read = text.trim() === '' && httpStatus >= 200 && httpStatus < 300 ? { object: {} } : jsonObjectOf(text);
  if ('unread' in read) return read.unread;
  const o: Record<string, unknown> = read.object;
  if (typeof o.error === 'object' && o.error !== null) {
    const e = o.error as { code?: unknown; message?: unknown; status?: unknown; details?: unknown };
    const violations = (Array.isArray(e.details) ? e.details : [])
      .flatMap((d: any) => (Array.isArray(d?.fieldViolations) ? d.fieldViolations : []))
      .map((v: any) => `${String(v?.field ?? '')}: ${String(v?.description ?? '')}`);
    const code = typeof e.code === 'number' && e.code > 0 ? e.code : httpStatus > 0 ? httpStatus : null;
    return { code, message: [`${String(e.status ?? '')} ${String(e.message ?? '')}`.trim(), ...violations].join('; '), requestId: null, data: e };
  }
  if (typeof o.error === 'string') {
    return { code: httpStatus || 400, message: `${o.error}: ${String(o.error_description ?? '')}`, requestId: null, data: o };
  }
  if (httpStatus < 200 || httpStatus >= 300) return { code: httpStatus, message: `HTTP ${httpStatus}`, requestId: null, data: o };
  return { code: 0, message: 'OK', requestId: typeof o.requestId === 'string' ? o.requestId : null, data: o };
}

export class GoogleClient {
  private readonly fetchImpl: typeof fetch;
  private readonly now: () => number;

  constructor(private readonly opts: GoogleClientOptions) {
    this.fetchImpl = opts.fetch ?? fetch;
    this.now = opts.now ?? Date.now;
  }

  get configured(): boolean {
    return this.opts.clientId !== undefined && this.opts.clientSecret !== undefined;
  }

  clientIdOrThrow(): string {
    return this.client().client_id;
  }

  private client(): { client_id: string; client_secret: string } {
    if (!this.opts.clientId || !this.opts.clientSecret) throw new GoogleNotConfiguredError();
    return { client_id: this.opts.clientId, client_secret: this.opts.clientSecret };
  }

  exchangeCode(code: string, redirectUri: string): Promise<PlatformAnswer> {
    return this.form('google_token', this.opts.tokenUrl, { ...this.client(), grant_type: 'authorization_code', code, redirect_uri: redirectUri });
  }

  refresh(refreshToken: string): Promise<PlatformAnswer> {
    return this.form('google_token', this.opts.tokenUrl, { ...this.client(), grant_type: 'refresh_token', refresh_token: refreshToken });
  }

  /** Revoking the refresh token ends the grant: its access tokens stop working too. */
  revoke(token: string): Promise<PlatformAnswer> {
    return this.form('google_revoke', this.opts.revokeUrl, { token });
  }

  ingest(accessToken: string, body: GoogleIngestBody, loginCustomerId?: string): Promise<PlatformAnswer> {
    return this.call('google_ingest', `${this.opts.apiBase}/events:ingest`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${accessToken}`,
        'content-type': 'application/json',
        ...(loginCustomerId ? { 'login-customer-id': loginCustomerId } : {}),
      },
      body: JSON.stringify(body),
    });
  }

  private form(endpoint: PlatformEndpoint, url: string, fields: Record<string, string>): Promise<PlatformAnswer> {
    return this.call(endpoint, url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
    });
  }

  private call(endpoint: PlatformEndpoint, url: string, init: { method: string; headers: Record<string, string>; body: string }): Promise<PlatformAnswer> {
    return platformCall(endpoint, url, { ...init, headers: { accept: 'application/json', ...init.headers } }, { ...this.opts, fetch: this.fetchImpl, now: this.now }, parseGoogleAnswer);
  }
}

// ---------------------------------------------------------------- connecting and refreshing

const grantSchema = z.object({ access_token: z.string().min(1), expires_in: z.number().nonnegative().optional(), refresh_token: z.string().min(1).optional() });

export interface GoogleGrant {
  readonly accessToken: string;
  readonly expiresIn: number | undefined;
  /** Only the code exchange returns one (with `access_type=offline`); a refresh keeps the one held. */
  readonly refreshToken: string | undefined;
}

export function parseGoogleGrant(a: PlatformAnswer): GoogleGrant | { readonly error: string } {
  if (a.code !== 0) return { error: a.message };
  const g = grantSchema.safeParse(a.data);
  if (!g.success) return { error: 'token answer has no access_token' };
  return { accessToken: g.data.access_token, expiresIn: g.data.expires_in, refreshToken: g.data.refresh_token };
}

// ---------------------------------------------------------------- answers

export function classifyGoogle(a: PlatformAnswer): Classification {
  const retry = (reason: string): Classification => ({ kind: 'retry', reason, retryAfterMs: a.retryAfterMs });
  if (a.transportError) return retry(a.transportError);
  if (a.httpStatus === 408 || a.httpStatus === 429 || a.httpStatus >= 500) return retry(`http_${a.httpStatus}`);
  if (a.code === null) return retry('unparseable');
  if (a.code === 0) return { kind: 'ok' };
  // UNAUTHENTICATED: the access token expired or the grant was revoked; PERMISSION_DENIED: the account's access
  // to the Ads account was removed. A refresh, else the advertiser authorises again.
  if (a.code === 401 || a.code === 403) return { kind: 'token', reason: String(a.code) };
  const perRecord = a.code === 400 && /\bevents\[\d+\]/.test(a.message);
  return { kind: 'permanent', reason: String(a.code), code: a.code, message: a.message, perRecord };
}

/** The event a violation names (`events[i]…`) alone, else halves. */
export function splitGoogle<T>(batch: readonly T[], message: string): [T[], T[]] {
  const m = /\bevents\[(\d+)\]/.exec(message);
  const i = m ? Number(m[1]) : -1;
  if (i >= 0 && i < batch.length) return [[batch[i]!], [...batch.slice(0, i), ...batch.slice(i + 1)]];
  return halves(batch);
}

// ---------------------------------------------------------------- the request

type GoogleConsent = 'CONSENT_GRANTED' | 'CONSENT_DENIED' | 'CONSENT_STATUS_UNSPECIFIED';
const consentOf = (v: 'GRANTED' | 'DENIED' | 'UNSPECIFIED'): GoogleConsent =>
  v === 'GRANTED' ? 'CONSENT_GRANTED' : v === 'DENIED' ? 'CONSENT_DENIED' : 'CONSENT_STATUS_UNSPECIFIED';

export interface GoogleEvent {
  readonly eventTimestamp: string;
  readonly transactionId: string;
  readonly eventSource: 'WEB';
  readonly adIdentifiers?: { readonly gclid?: string; readonly gbraid?: string; readonly wbraid?: string };
  readonly userData?: { readonly userIdentifiers: ReadonlyArray<{ emailAddress: string } | { phoneNumber: string }> };
  readonly consent: { readonly adUserData: GoogleConsent; readonly adPersonalization: GoogleConsent };
  readonly conversionValue?: number;
  readonly currency?: string;
}

export interface GoogleIngestBody {
  readonly destinations: ReadonlyArray<{
    readonly operatingAccount: { readonly accountType: 'GOOGLE_ADS'; readonly accountId: string };
    readonly loginAccount?: { readonly accountType: 'GOOGLE_ADS'; readonly accountId: string };
    readonly productDestinationId: string;
  }>;
  readonly encoding: 'HEX';
  readonly events: readonly GoogleEvent[];
  /** Checks the request without importing anything: what a test event code asks for. */
  readonly validateOnly?: boolean;
}

/** The one Google click id of a record: gclid first, else gbraid, else wbraid (they are mutually exclusive). */
export function googleClickId(record: PlatformEventRecord): GoogleEvent['adIdentifiers'] | undefined {
  const u = (record.user ?? {}) as { gclid?: unknown; gbraid?: unknown; wbraid?: unknown };
  let params: URLSearchParams | null = null;
  try {
    params = new URL(record.page.url).searchParams;
  } catch {
    params = null;
  }
  for (const k of ['gclid', 'gbraid', 'wbraid'] as const) {
    const v = typeof u[k] === 'string' && u[k] !== '' ? (u[k] as string) : params?.get(k);
    if (v) return { [k]: v };
  }
  return undefined;
}

export function googleEvent(record: PlatformEventRecord, setup: Pick<GoogleSetup, 'pii_mode'>): GoogleEvent {
  const u = record.user ?? {};
  const ids: Array<{ emailAddress: string } | { phoneNumber: string }> = [];
  // User data goes only with ad_user_data consent (Google's EU user consent policy) and pii_mode hashed.
  if (setup.pii_mode === 'hashed' && record.consent.ad_user_data !== 'DENIED') {
    for (const e of u.email ?? []) ids.push({ emailAddress: e });
    for (const p of u.phone ?? []) ids.push({ phoneNumber: p });
  }
  const click = googleClickId(record);
  const p = record.properties ?? {};
  const order = typeof p.order_id === 'string' ? p.order_id : (record.transaction_id ?? record.event_id);
  return {
    eventTimestamp: new Date(record.event_time * 1000).toISOString(),
    transactionId: order,
    eventSource: 'WEB',
    ...(click ? { adIdentifiers: click } : {}),
    ...(ids.length > 0 ? { userData: { userIdentifiers: ids.slice(0, 10) } } : {}),
    consent: { adUserData: consentOf(record.consent.ad_user_data), adPersonalization: consentOf(record.consent.ad_personalization) },
    ...(typeof p.value === 'number' ? { conversionValue: p.value } : {}),
    ...(typeof p.currency === 'string' ? { currency: p.currency.toUpperCase() } : {}),
  };
}

/**
 * Google's match keys (enhanced conversions: a click id, plus hashed e-mail and phone). gclid, gbraid and wbraid
 * are one click id each (an event carries one at most), so each weighs what a click id weighs.
 */
export const GOOGLE_MATCH_WEIGHTS: MatchWeights = { gclid: 6, gbraid: 6, wbraid: 6, email: 3, phone: 1 };

export function googleMatch(event: unknown): MatchScore {
  const e = (event ?? {}) as Partial<GoogleEvent>;
  const ids = e.userData?.userIdentifiers ?? [];
  return scoreMatch(
    presentKeys({
      ...(e.adIdentifiers ?? {}),
      email: ids.flatMap((i) => ('emailAddress' in i ? [i.emailAddress] : [])),
      phone: ids.flatMap((i) => ('phoneNumber' in i ? [i.phoneNumber] : [])),
    }),
    GOOGLE_MATCH_WEIGHTS,
  );
}

export interface GoogleRequest {
  readonly body: GoogleIngestBody;
  readonly loginCustomerId?: string;
}

export function googleKind(client: GoogleClient, setup: GoogleSetup): DestinationKind<GoogleRequest> {
  return {
    name: 'google',
    auth: 'oauth_refresh',
    batchLimit: GOOGLE_BATCH_LIMIT,
    // Consent travels in the event (adUserData, adPersonalization); an event left with nothing to match on
    // (no Google click id, no user data it may carry) would only be refused, so it is not sent.
    consent: (record) => {
      const e = googleEvent(record, setup);
      return e.adIdentifiers || e.userData ? { send: true, record } : { send: false, reason: 'no_match_keys' };
    },
    request: (group: BatchGroup, batch: readonly Outgoing[]) => ({
      body: {
        destinations: [
          {
            operatingAccount: { accountType: 'GOOGLE_ADS', accountId: setup.customer_id },
            ...(setup.login_customer_id ? { loginAccount: { accountType: 'GOOGLE_ADS', accountId: setup.login_customer_id } } : {}),
            productDestinationId: setup.conversion_action_id,
          },
        ],
        encoding: 'HEX',
        events: batch.map((r) => googleEvent(r.record, setup)),
        // Google has no test event code: test-mode conversions are validated, not imported.
        ...(group.testEventCode === '' ? {} : { validateOnly: true }),
      },
      ...(setup.login_customer_id ? { loginCustomerId: setup.login_customer_id } : {}),
    }),
    payloads: (req) => req.body.events,
    match: googleMatch,
    send: (accessToken, req) => client.ingest(accessToken, req.body, req.loginCustomerId),
    classify: classifyGoogle,
    // The ingestion answers for the whole request (processing goes on asynchronously): an ok takes every event.
    results: (batch) => batch.map(() => ({ outcome: 'sent' as const })),
    isolate: (batch, c) => splitGoogle(batch, c.message),
  };
}
