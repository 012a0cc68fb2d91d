/**
 * The Meta kind: the Conversions API (`POST {META_API_BASE}/{pixel_id}/events`, at most 1,000 events a request),
 * authorised by a long-lived user token (the login dialog's code, exchanged, then `fb_exchange_token`): it is not
 * refreshed; when Meta stops taking it the destination needs re-authorisation. Disconnecting removes the app's
 * permissions (`DELETE /me/permissions`). Answers are Graph errors (`{"error": {code, error_subcode,
 * is_transient, …}}`), read into the forwarder's PlatformAnswer so the sender treats every kind alike.
 */
import { createHmac } from 'node:crypto';
import { z } from 'zod';
import type { PlatformEventRecord } from '../../domain/conversion.js';
import { ServiceError } from '../../shared/errors.js';
import type { Classification } from '../classify.js';
import { jsonObjectOf, platformCall, withStatusWhenUnread, type ParsedAnswer, type PlatformAnswer, type PlatformEndpoint } from '../platform-client.js';
import { halves, type BatchGroup, type DestinationKind, type Outgoing } from './kind.js';
import { presentKeys, scoreMatch, type MatchScore, type MatchWeights } from './match-quality.js';

export const META_BATCH_LIMIT = 1000;
export const META_ACTION_SOURCES = [
  'website',
  'app',
  'email',
  'phone_call',
  'chat',
  'physical_store',
  'system_generated',
  'business_messaging',
  'other',
] as const;

/** A `meta` destination's setup (operator contract, "Destinations"). */
export const metaSetupSchema = z
  .object({
    pixel_id: z.string().regex(/^\d{1,32}$/, 'must be the pixel (dataset) id: digits only'),
    action_source: z.enum(META_ACTION_SOURCES),
    pii_mode: z.enum(['hashed', 'none']),
    test_event_code: z.string().min(1).max(64).optional(),
    events: z.array(z.object({ name: z.string().min(1).max(100), platform_event: z.string().min(1).max(100) }).strict()).min(1).max(200),
  })
  .strict();
export type MetaSetup = z.infer<typeof metaSetupSchema>;

export class MetaNotConfiguredError extends ServiceError {
  constructor() {
    super('the Meta app is not configured: set META_APP_ID and META_APP_SECRET');
  }
}

export interface MetaClientOptions {
  readonly apiBase: string;
  readonly appId: string | undefined;
  readonly appSecret: string | undefined;
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
  readonly fetch?: typeof fetch;
  readonly now?: () => number;
}

/** A Graph answer in the forwarder's terms: `code` 0 for success, the Graph error code otherwise. */
export function parseGraphAnswer(text: string): ParsedAnswer {
  const read = jsonObjectOf(text);
  if ('unread' in read) return read.unread;
  const o = read.object;
  const err = o.error;
  if (typeof err === 'object' && err !== null && !Array.isArray(err)) {
    const e = err as Record<string, unknown>;
    const code = typeof e.code === 'number' && Number.isSafeInteger(e.code) && e.code > 0 ? e.code : null;
    const base = typeof e.message === 'string' ? e.message : 'Graph error';
    const detail = typeof e.error_user_msg === 'string' && e.error_user_msg !== '' ? `: ${e.error_user_msg}` : '';
    return {
      code,
      message: code === null ? `error without a numeric code: ${base}` : `${base}${detail}`,
      requestId: typeof e.fbtrace_id === 'string' ? e.fbtrace_id : null,
      data: e,
    };
  }
  return { code: 0, message: 'OK', requestId: typeof o.fbtrace_id === 'string' ? o.fbtrace_id : null, data: o };
}

export class MetaClient {
  private readonly fetchImpl: typeof fetch;
  private readonly now: () => number;

  constructor(private readonly opts: MetaClientOptions) {
    this.fetchImpl = opts.fetch ?? fetch;
    this.now = opts.now ?? Date.now;
  }

  get configured(): boolean {
    return this.opts.appId !== undefined && this.opts.appSecret !== undefined;
  }

  appIdOrThrow(): string {
    return this.app().client_id;
  }

  private app(): { client_id: string; client_secret: string } {
    if (!this.opts.appId || !this.opts.appSecret) throw new MetaNotConfiguredError();
    return { client_id: this.opts.appId, client_secret: this.opts.appSecret };
  }

  /** Graph's `appsecret_proof`: proves a call with a user token comes from the app's server. */
  private proof(accessToken: string): string {
    return createHmac('sha256', this.app().client_secret).update(accessToken).digest('hex');
  }

  /** The login dialog's code for a short-lived user token. */
  exchangeCode(code: string, redirectUri: string): Promise<PlatformAnswer> {
    return this.call('meta_token', 'GET', '/oauth/access_token', { query: { ...this.app(), redirect_uri: redirectUri, code } });
  }

  /** A short-lived token for a long-lived one (about 60 days). */
  longLived(shortToken: string): Promise<PlatformAnswer> {
    return this.call('meta_token', 'GET', '/oauth/access_token', {
      query: { grant_type: 'fb_exchange_token', ...this.app(), fb_exchange_token: shortToken },
    });
  }

  pixel(accessToken: string, pixelId: string): Promise<PlatformAnswer> {
    return this.call('meta_pixel', 'GET', `/${encodeURIComponent(pixelId)}`, { accessToken, query: { fields: 'id,name' } });
  }

  events(accessToken: string, pixelId: string, body: MetaEventsBody): Promise<PlatformAnswer> {
    return this.call('meta_events', 'POST', `/${encodeURIComponent(pixelId)}/events`, { accessToken, body });
  }

  /** Removes the app's permissions: every token the app holds for that user stops working. */
  revoke(accessToken: string): Promise<PlatformAnswer> {
    return this.call('meta_revoke', 'DELETE', '/me/permissions', { accessToken });
  }

  private call(
    endpoint: PlatformEndpoint,
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    opts: { query?: Record<string, string>; body?: unknown; accessToken?: string },
  ): Promise<PlatformAnswer> {
    const headers: Record<string, string> = { accept: 'application/json' };
    const query = new URLSearchParams(opts.query ?? {});
    if (opts.accessToken !== undefined) {
      headers.authorization = `Bearer ${opts.accessToken}`;
      query.set('appsecret_proof', this.proof(opts.accessToken));
    }
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    return platformCall(endpoint, `${this.opts.apiBase}${path}?${query}`, { method, headers, body }, { ...this.opts, fetch: this.fetchImpl, now: this.now }, (text, status) =>
      withStatusWhenUnread(parseGraphAnswer(text), status),
    );
  }
}

// ---------------------------------------------------------------- connecting

const tokenSchema = z.object({ access_token: z.string().min(1), expires_in: z.number().nonnegative().optional() });

export interface MetaGrant {
  readonly accessToken: string;
  /** Seconds; undefined when Meta gave no expiry (a token that does not expire). */
  readonly expiresIn: number | undefined;
  /** The pixel the token was checked against. */
  readonly accountId: string;
}

/**
 * Connecting a Meta destination: the dialog's code for a short-lived token, that for a long-lived one, then a check
 * that the token reaches the destination's pixel. The failed answer is returned as it came, for the caller to show.
 */
export async function connectMeta(
  client: MetaClient,
  code: string,
  redirectUri: string,
  pixelId: string,
): Promise<MetaGrant | { readonly error: string; readonly answer: PlatformAnswer | null }> {
  const short = await client.exchangeCode(code, redirectUri);
  if (short.code !== 0) return { error: `code exchange refused: ${short.message}`, answer: short };
  const s = tokenSchema.safeParse(short.data);
  if (!s.success) return { error: 'code exchange answer has no access_token', answer: short };
  const long = await client.longLived(s.data.access_token);
  if (long.code !== 0) return { error: `long-lived token exchange refused: ${long.message}`, answer: long };
  const l = tokenSchema.safeParse(long.data);
  if (!l.success) return { error: 'long-lived token answer has no access_token', answer: long };
  const px = await client.pixel(l.data.access_token, pixelId);
  if (px.code !== 0) return { error: `the token cannot reach pixel ${pixelId}: ${px.message}`, answer: px };
  return { accessToken: l.data.access_token, expiresIn: l.data.expires_in, accountId: pixelId };
}

// ---------------------------------------------------------------- answers

/** Graph's throttling codes: application, user, page and custom-audience/ads limits. */
const RATE_LIMIT_CODES: ReadonlySet<number> = new Set([4, 17, 32, 613, 80004]);
/** Unknown error and temporary service error: Graph's own advice is to retry. */
const TRANSIENT_CODES: ReadonlySet<number> = new Set([1, 2]);
/** The token is invalid, expired or revoked (190), the session is gone (102), or a permission was removed. */
const isTokenCode = (code: number): boolean => code === 190 || code === 102 || code === 10 || (code >= 200 && code <= 299);
/** Invalid parameter: one bad event refuses the whole request. */
export const META_INVALID_PARAMETER = 100;
/** Code 100 with this subcode: the pixel does not exist or the token cannot reach it (not an event's fault). */
const UNKNOWN_OBJECT_SUBCODE = 33;

export function classifyMeta(a: PlatformAnswer): Classification {
  const retry = (reason: string): Classification => ({ kind: 'retry', reason, retryAfterMs: a.retryAfterMs });
  if (a.transportError) return retry(a.transportError);
  if (a.httpStatus === 429 || a.httpStatus >= 500) return retry(`http_${a.httpStatus}`);
  if (a.code === null) return retry('unparseable');
  if (a.code === 0) return a.httpStatus >= 200 && a.httpStatus < 300 ? { kind: 'ok' } : retry(`http_${a.httpStatus}`);
  const e = (a.data ?? {}) as { is_transient?: unknown; error_subcode?: unknown };
  const reason = String(a.code);
  if (RATE_LIMIT_CODES.has(a.code) || TRANSIENT_CODES.has(a.code) || e.is_transient === true) return retry(reason);
  if (isTokenCode(a.code)) return { kind: 'token', reason };
  const perRecord = a.code === META_INVALID_PARAMETER && e.error_subcode !== UNKNOWN_OBJECT_SUBCODE;
  return { kind: 'permanent', reason, code: a.code, message: a.message, perRecord };
}

// ---------------------------------------------------------------- the request

export interface MetaServerEvent {
  readonly event_name: string;
  readonly event_time: number;
  readonly event_id: string;
  readonly action_source: MetaSetup['action_source'];
  readonly event_source_url?: string;
  readonly user_data: Readonly<Record<string, unknown>>;
  readonly custom_data?: Readonly<Record<string, unknown>>;
  readonly data_processing_options: readonly string[];
  readonly data_processing_options_country?: number;
  readonly data_processing_options_state?: number;
}

export interface MetaEventsBody {
  readonly data: readonly MetaServerEvent[];
  readonly test_event_code?: string;
}

export interface MetaRequest {
  readonly pixelId: string;
  readonly body: MetaEventsBody;
}

/**
 * The `fbc` click id Meta documents (`fb.1.<creation time ms>.<fbclid>`) from the page URL's `fbclid`; the event's
 * time stands in for the click's, which the page URL does not carry.
 */
export function fbcFromUrl(url: string, eventTimeSeconds: number): string | undefined {
  try {
    const fbclid = new URL(url).searchParams.get('fbclid');
    return fbclid ? `fb.1.${eventTimeSeconds * 1000}.${fbclid}` : undefined;
  } catch {
    return undefined;
  }
}

/** Other platforms' click ids: each goes to its own platform only, so they leave the page URL sent to Meta. */
const FOREIGN_CLICK_IDS = ['ttclid', 'gclid', 'gbraid', 'wbraid', 'dclid', 'msclkid'];

export function withoutForeignClickIds(url: string): string {
  try {
    const u = new URL(url);
    const had = FOREIGN_CLICK_IDS.filter((p) => u.searchParams.has(p));
    if (had.length === 0) return url;
    for (const p of had) u.searchParams.delete(p);
    return u.toString();
  } catch {
    return url;
  }
}

/** Meta's custom_data from the record's commerce properties (TikTok's `contents` items become Meta's). */
function customData(record: PlatformEventRecord): Record<string, unknown> | undefined {
  const p = record.properties ?? {};
  const out: Record<string, unknown> = {};
  if (typeof p.value === 'number') out.value = p.value;
  if (typeof p.currency === 'string') out.currency = p.currency;
  if (typeof p.order_id === 'string') out.order_id = p.order_id;
  if (typeof p.content_type === 'string') out.content_type = p.content_type;
  if (typeof p.query === 'string') out.search_string = p.query;
  if (Array.isArray(p.contents)) {
    out.contents = p.contents.flatMap((c: unknown) => {
      if (typeof c !== 'object' || c === null) return [];
      const item = c as Record<string, unknown>;
      const id = item.content_id ?? item.id;
      if (typeof id !== 'string' && typeof id !== 'number') return [];
      return [{ id: String(id), ...(typeof item.quantity === 'number' ? { quantity: item.quantity } : {}), ...(typeof item.price === 'number' ? { item_price: item.price } : {}) }];
    });
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

export function metaEvent(record: PlatformEventRecord, setup: Pick<MetaSetup, 'action_source' | 'pii_mode'>): MetaServerEvent {
  const u = record.user ?? {};
  const extra = u as { fbc?: unknown; fbp?: unknown };
  const user: Record<string, unknown> = {};
  const nonEmpty = (v: readonly string[] | undefined): v is readonly string[] => Array.isArray(v) && v.length > 0;
  if (setup.pii_mode === 'hashed') {
    if (nonEmpty(u.email)) user.em = u.email;
    if (nonEmpty(u.phone)) user.ph = u.phone;
    if (nonEmpty(u.external_id)) user.external_id = u.external_id;
  }
  if (u.user_agent) user.client_user_agent = u.user_agent;
  const fbc = typeof extra.fbc === 'string' ? extra.fbc : fbcFromUrl(record.page.url, record.event_time);
  if (fbc) user.fbc = fbc;
  if (typeof extra.fbp === 'string') user.fbp = extra.fbp;
  const custom = customData(record);
  const ldu = record.limited_data_use || record.consent.ad_personalization === 'DENIED';
  return {
    event_name: record.event,
    event_time: record.event_time,
    event_id: record.event_id,
    action_source: setup.action_source,
    ...(setup.action_source === 'website' && record.page.url ? { event_source_url: withoutForeignClickIds(record.page.url) } : {}),
    user_data: user,
    ...(custom ? { custom_data: custom } : {}),
    // Limited Data Use with country and state 0: Meta decides from the event's geolocation where it applies.
    ...(ldu ? { data_processing_options: ['LDU'], data_processing_options_country: 0, data_processing_options_state: 0 } : { data_processing_options: [] }),
  };
}

/**
 * Meta's match keys, weighted after its Event Match Quality guidance: e-mail first, then phone, the click id `fbc`,
 * external id, the browser id `fbp` and the user agent (Meta values IP and user agent together; the records carry
 * no IP address).
 */
export const META_MATCH_WEIGHTS: MatchWeights = { email: 3, phone: 2, fbc: 2, external_id: 1.5, fbp: 1, user_agent: 0.5 };

export function metaMatch(event: unknown): MatchScore {
  const u = ((event as { user_data?: unknown } | null)?.user_data ?? {}) as Record<string, unknown>;
  return scoreMatch(
    presentKeys({ email: u.em, phone: u.ph, external_id: u.external_id, fbc: u.fbc, fbp: u.fbp, user_agent: u.client_user_agent }),
    META_MATCH_WEIGHTS,
  );
}

export function metaKind(client: MetaClient, setup: Pick<MetaSetup, 'action_source' | 'pii_mode'>): DestinationKind<MetaRequest> {
  return {
    name: 'meta',
    auth: 'long_lived',
    batchLimit: META_BATCH_LIMIT,
    // Meta has no consent field: an event whose person refused ad_user_data does not go there at all.
    consent: (record) => (record.consent.ad_user_data === 'DENIED' ? { send: false, reason: 'consent_denied' } : { send: true, record }),
    request: (group: BatchGroup, batch: readonly Outgoing[]) => ({
      pixelId: group.eventSourceId,
      body: {
        data: batch.map((r) => metaEvent(r.record, setup)),
        ...(group.testEventCode === '' ? {} : { test_event_code: group.testEventCode }),
      },
    }),
    payloads: (req) => req.body.data,
    match: metaMatch,
    send: (accessToken, req) => client.events(accessToken, req.pixelId, req.body),
    classify: classifyMeta,
    // An ok answer takes every event of the request (Meta refuses the whole request otherwise).
    results: (batch) => batch.map(() => ({ outcome: 'sent' as const })),
    // Meta's error names the problem but not the event: halves.
    isolate: (batch) => halves(batch),
  };
}
