/**
 * A stand-in for Google's Data Manager API event ingestion (`POST /v1/events:ingest`) and Google's OAuth 2.0
 * endpoints (authorisation page, token, revoke), built from Google's public documentation. Errors are
 * `google.rpc.Status` (`{"error": {code, message, status, details: [{"@type": "…BadRequest", fieldViolations:
 * [{field: "events[3].adIdentifiers", description}]}]}}`): a request with one invalid event is refused whole, and the
 * violation names the event. Its control API (`/_control`) injects faults and shows what arrived.
 */
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import formbody from '@fastify/formbody';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';

export const GOOGLE_APP = { id: 'google-client.apps.googleusercontent.com', secret: 'google-secret' } as const;
export const MAX_EVENTS = 2000;
/** Google Ads takes click conversions up to 90 days after the click; an event older than that is refused. */
export const MAX_AGE_DAYS = 90;
const CONSENT = ['CONSENT_GRANTED', 'CONSENT_DENIED', 'CONSENT_STATUS_UNSPECIFIED'];
const SHA256 = /^[0-9a-f]{64}$/;

export type GoogleFaultKey = 'ingest' | 'token' | 'revoke';
export interface GoogleFault {
  http_status: number;
  status?: string;
  message?: string;
  delay_ms?: number;
  times: number;
}
export interface GoogleState {
  readonly codes: Map<string, { redirectUri: string; expiresAt: number }>;
  readonly access: Map<string, { refresh: string | null; expiresAt: number; invalid: boolean }>;
  readonly refresh: Map<string, { revoked: boolean }>;
  faults: Record<GoogleFaultKey, GoogleFault[]>;
  received: Array<{ destinations: unknown; event: Record<string, any>; request_id: string; validate_only: boolean }>;
  calls: Array<{ endpoint: GoogleFaultKey | 'auth'; http_status: number; events: number }>;
  denyAuthorize: boolean;
  readonly accessTtl: number;
  readonly now: () => number;
}

const isObj = (v: unknown): v is Record<string, any> => typeof v === 'object' && v !== null && !Array.isArray(v);
const STATUS_BY_HTTP: Record<number, string> = { 400: 'INVALID_ARGUMENT', 401: 'UNAUTHENTICATED', 403: 'PERMISSION_DENIED', 429: 'RESOURCE_EXHAUSTED', 500: 'INTERNAL', 503: 'UNAVAILABLE' };

function rpcError(state: GoogleState, reply: FastifyReply, endpoint: GoogleFaultKey, http: number, message: string, violations: Array<{ field: string; description: string }> = [], events = 0) {
  state.calls.push({ endpoint, http_status: http, events });
  return reply.code(http).send({
    error: {
      code: http,
      message,
      status: STATUS_BY_HTTP[http] ?? 'UNKNOWN',
      ...(violations.length > 0 ? { details: [{ '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: violations }] } : {}),
    },
  });
}

/** The first problem of one event, as a field violation; null when it is acceptable. */
export function eventViolation(e: unknown, i: number, nowMs: number): { field: string; description: string } | null {
  const at = (f: string, description: string) => ({ field: `events[${i}]${f}`, description });
  if (!isObj(e)) return at('', 'must be an object');
  const t = typeof e.eventTimestamp === 'string' ? Date.parse(e.eventTimestamp) : NaN;
  if (!/^\d{4}-\d{2}-\d{2}T/.test(String(e.eventTimestamp)) || Number.isNaN(t)) return at('.eventTimestamp', 'must be an RFC 3339 timestamp');
  if (t > nowMs + 10 * 60_000) return at('.eventTimestamp', 'must not be in the future');
  if (t < nowMs - MAX_AGE_DAYS * 86_400_000) return at('.eventTimestamp', `is older than ${MAX_AGE_DAYS} days`);
  if (e.transactionId !== undefined && (typeof e.transactionId !== 'string' || e.transactionId === '')) return at('.transactionId', 'must be a non-empty string');
  const ids = isObj(e.adIdentifiers) ? e.adIdentifiers : {};
  const clicks = ['gclid', 'gbraid', 'wbraid'].filter((k) => ids[k] !== undefined);
  if (clicks.length > 1) return at('.adIdentifiers', 'gclid, gbraid and wbraid are mutually exclusive');
  for (const k of clicks) if (typeof ids[k] !== 'string' || ids[k] === '') return at(`.adIdentifiers.${k}`, 'must be a non-empty string');
  const uids = isObj(e.userData) && Array.isArray(e.userData.userIdentifiers) ? e.userData.userIdentifiers : [];
  if (uids.length > 10) return at('.userData.userIdentifiers', 'at most 10 identifiers');
  for (const [j, u] of uids.entries()) {
    const key = isObj(u) ? Object.keys(u) : [];
    if (key.length !== 1 || !['emailAddress', 'phoneNumber'].includes(key[0]!)) return at(`.userData.userIdentifiers[${j}]`, 'must hold one emailAddress or phoneNumber');
    if (!SHA256.test(String((u as Record<string, unknown>)[key[0]!]))) return at(`.userData.userIdentifiers[${j}].${key[0]}`, 'must be a SHA-256 hash, hex encoded');
  }
  if (clicks.length === 0 && uids.length === 0) return at('', 'needs an ad identifier (gclid, gbraid or wbraid) or user identifiers');
  if (e.consent !== undefined) {
    if (!isObj(e.consent)) return at('.consent', 'must be an object');
    for (const k of ['adUserData', 'adPersonalization']) if (e.consent[k] !== undefined && !CONSENT.includes(e.consent[k])) return at(`.consent.${k}`, `must be one of ${CONSENT.join(', ')}`);
  }
  if (e.conversionValue !== undefined && (typeof e.conversionValue !== 'number' || e.conversionValue < 0)) return at('.conversionValue', 'must be a non-negative number');
  if (e.currency !== undefined && (typeof e.currency !== 'string' || !/^[A-Z]{3}$/.test(e.currency))) return at('.currency', 'must be an ISO 4217 code');
  return null;
}

export function ingestViolation(body: unknown, nowMs: number): { field: string; description: string } | null {
  if (!isObj(body)) return { field: '', description: 'the body must be a JSON object' };
  const ds = body.destinations;
  if (!Array.isArray(ds) || ds.length === 0) return { field: 'destinations', description: 'at least one destination is required' };
  for (const [i, d] of ds.entries()) {
    if (!isObj(d) || !isObj(d.operatingAccount) || d.operatingAccount.accountType !== 'GOOGLE_ADS' || !/^\d{10}$/.test(String(d.operatingAccount.accountId))) {
      return { field: `destinations[${i}].operatingAccount`, description: 'must be a GOOGLE_ADS account with a 10-digit accountId' };
    }
    if (!/^\d+$/.test(String(d.productDestinationId))) return { field: `destinations[${i}].productDestinationId`, description: 'must be the conversion action id' };
  }
  if (body.encoding !== undefined && body.encoding !== 'HEX' && body.encoding !== 'BASE64') return { field: 'encoding', description: 'must be HEX or BASE64' };
  if (!Array.isArray(body.events) || body.events.length === 0) return { field: 'events', description: 'at least one event is required' };
  if (body.events.length > MAX_EVENTS) return { field: 'events', description: `at most ${MAX_EVENTS} events per request (got ${body.events.length})` };
  for (const [i, e] of body.events.entries()) {
    const v = eventViolation(e, i, nowMs);
    if (v) return v;
  }
  return null;
}

export type GoogleSandboxApp = FastifyInstance & { readonly google: GoogleState };

export async function buildGoogleSandbox(opts: { accessTtlSeconds?: number; now?: () => number } = {}): Promise<GoogleSandboxApp> {
  const state: GoogleState = {
    codes: new Map(),
    access: new Map(),
    refresh: new Map(),
    faults: { ingest: [], token: [], revoke: [] },
    received: [],
    calls: [],
    denyAuthorize: false,
    accessTtl: opts.accessTtlSeconds ?? 3599,
    now: opts.now ?? Date.now,
  };
  const app = Fastify({ logger: false, bodyLimit: 32 * 1024 * 1024, forceCloseConnections: true });
  await app.register(formbody);
  app.decorate('google', state);

  const fault = async (key: GoogleFaultKey, reply: FastifyReply, events = 0): Promise<boolean> => {
    const head = state.faults[key][0];
    if (!head) return false;
    head.times -= 1;
    if (head.times <= 0) state.faults[key].shift();
    if (head.delay_ms) await sleep(head.delay_ms);
    rpcError(state, reply, key, head.http_status, head.message ?? 'injected fault', [], events);
    return true;
  };
  const issueAccess = (refresh: string | null) => {
    const token = `ya29.${randomBytes(24).toString('base64url')}`;
    state.access.set(token, { refresh, expiresAt: state.now() + state.accessTtl * 1000, invalid: false });
    return token;
  };
  const bearer = (request: FastifyRequest): string | null => {
    const m = /^Bearer\s+(\S+)$/i.exec(String(request.headers.authorization ?? ''));
    return m ? m[1]! : null;
  };

  app.get('/o/oauth2/v2/auth', async (request, reply) => {
    const q = request.query as Record<string, string | undefined>;
    if (q.client_id !== GOOGLE_APP.id || !q.redirect_uri || q.response_type !== 'code') {
      return reply.code(400).type('text/html').send('<h1>Error 400: invalid_request</h1>');
    }
    const back = new URL(q.redirect_uri);
    if (state.denyAuthorize) back.searchParams.set('error', 'access_denied');
    else {
      const code = `4/${randomBytes(24).toString('base64url')}`;
      state.codes.set(code, { redirectUri: q.redirect_uri, expiresAt: state.now() + 10 * 60_000 });
      back.searchParams.set('code', code);
    }
    if (q.state) back.searchParams.set('state', q.state);
    state.calls.push({ endpoint: 'auth', http_status: 302, events: 0 });
    return reply.redirect(back.toString(), 302);
  });

  // Google's token endpoint answers OAuth errors as {error, error_description}, not as google.rpc.Status.
  app.post('/token', async (request, reply) => {
    if (await fault('token', reply)) return reply;
    const b = (request.body ?? {}) as Record<string, string | undefined>;
    const oauthError = (http: number, error: string, description: string) => {
      state.calls.push({ endpoint: 'token', http_status: http, events: 0 });
      return reply.code(http).send({ error, error_description: description });
    };
    if (b.client_id !== GOOGLE_APP.id || b.client_secret !== GOOGLE_APP.secret) return oauthError(401, 'invalid_client', 'The OAuth client was not found.');
    if (b.grant_type === 'authorization_code') {
      const grant = b.code ? state.codes.get(b.code) : undefined;
      if (b.code) state.codes.delete(b.code);
      if (!grant || grant.expiresAt <= state.now()) return oauthError(400, 'invalid_grant', 'Malformed auth code.');
      if (grant.redirectUri !== b.redirect_uri) return oauthError(400, 'redirect_uri_mismatch', 'Bad Request');
      const refresh = `1//${randomBytes(24).toString('base64url')}`;
      state.refresh.set(refresh, { revoked: false });
      state.calls.push({ endpoint: 'token', http_status: 200, events: 0 });
      return { access_token: issueAccess(refresh), expires_in: state.accessTtl, refresh_token: refresh, scope: 'https://www.googleapis.com/auth/datamanager', token_type: 'Bearer' };
    }
    if (b.grant_type === 'refresh_token') {
      const r = b.refresh_token ? state.refresh.get(b.refresh_token) : undefined;
      if (!r || r.revoked) return oauthError(400, 'invalid_grant', 'Token has been expired or revoked.');
      state.calls.push({ endpoint: 'token', http_status: 200, events: 0 });
      return { access_token: issueAccess(b.refresh_token!), expires_in: state.accessTtl, scope: 'https://www.googleapis.com/auth/datamanager', token_type: 'Bearer' };
    }
    return oauthError(400, 'unsupported_grant_type', 'Invalid grant_type.');
  });

  app.post('/revoke', async (request, reply) => {
    if (await fault('revoke', reply)) return reply;
    const token = (request.query as Record<string, string | undefined>).token ?? ((request.body ?? {}) as Record<string, string | undefined>).token;
    const refresh = token ? (state.refresh.has(token) ? token : state.access.get(token)?.refresh) : undefined;
    if (!token || (refresh === undefined && !state.access.has(token))) {
      state.calls.push({ endpoint: 'revoke', http_status: 400, events: 0 });
      return reply.code(400).send({ error: 'invalid_token', error_description: 'Token expired or revoked' });
    }
    // Revoking either token ends the whole grant: the refresh token and every access token issued from it.
    if (refresh) state.refresh.set(refresh, { revoked: true });
    for (const a of state.access.values()) if (a.refresh === refresh || refresh === undefined) a.invalid = true;
    state.calls.push({ endpoint: 'revoke', http_status: 200, events: 0 });
    return {};
  });

  app.post('/v1/events:ingest', async (request, reply) => {
    const b = request.body;
    const events = isObj(b) && Array.isArray(b.events) ? b.events.length : 0;
    if (await fault('ingest', reply, events)) return reply;
    const token = bearer(request);
    const a = token ? state.access.get(token) : undefined;
    if (!a || a.invalid || a.expiresAt <= state.now()) return rpcError(state, reply, 'ingest', 401, 'Request had invalid authentication credentials. Expected OAuth 2 access token.', [], events);
    const v = ingestViolation(b, state.now());
    if (v) return rpcError(state, reply, 'ingest', 400, 'Request contains an invalid argument.', [v], events);
    const requestId = randomBytes(12).toString('hex');
    // validateOnly: checked like any request, nothing imported (kept here with the flag so tests can see it).
    const validateOnly = (b as { validateOnly?: unknown }).validateOnly === true;
    for (const event of (b as { events: Array<Record<string, any>> }).events) {
      state.received.push({ destinations: (b as any).destinations, event, request_id: requestId, validate_only: validateOnly });
    }
    state.calls.push({ endpoint: 'ingest', http_status: 200, events });
    return { requestId };
  });

  app.post('/_control/faults', async (request, reply) => {
    const b = request.body;
    if (!isObj(b)) return reply.code(400).send({ error: 'body must be an object' });
    for (const [k, list] of Object.entries(b)) {
      if (!['ingest', 'token', 'revoke'].includes(k) || !Array.isArray(list)) return reply.code(400).send({ error: `${k}: unknown endpoint key or not an array` });
      for (const f of list) {
        if (!isObj(f) || typeof f.http_status !== 'number') return reply.code(400).send({ error: `${k}: each fault needs an http_status` });
        state.faults[k as GoogleFaultKey].push({ times: 1, ...(f as Omit<GoogleFault, 'times'>) });
      }
    }
    return { ok: true };
  });
  app.delete('/_control/faults', async () => {
    state.faults = { ingest: [], token: [], revoke: [] };
    return { cleared: true };
  });
  app.get('/_control/received', async () => ({ events: state.received }));
  app.get('/_control/calls', async (request) => {
    const e = (request.query as { endpoint?: string }).endpoint;
    const calls = e ? state.calls.filter((c) => c.endpoint === e) : state.calls;
    return { count: calls.length, calls };
  });
  /** Access tokens stop working (as after their hour); refresh tokens still do. */
  app.post('/_control/expire-access', async () => {
    for (const a of state.access.values()) a.invalid = true;
    return { ok: true };
  });
  app.post('/_control/settings', async (request) => {
    const b = request.body as { deny_authorize?: boolean };
    if (typeof b?.deny_authorize === 'boolean') state.denyAuthorize = b.deny_authorize;
    return { deny_authorize: state.denyAuthorize };
  });
  return app as unknown as GoogleSandboxApp;
}

export interface RunningGoogleSandbox {
  readonly url: string;
  /** GOOGLE_API_BASE */
  readonly apiBase: string;
  /** GOOGLE_AUTH_URL */
  readonly authUrl: string;
  /** GOOGLE_TOKEN_URL */
  readonly tokenUrl: string;
  readonly revokeUrl: string;
  readonly controlUrl: string;
  readonly app: GoogleSandboxApp;
  close(): Promise<void>;
}

/** The service's Google variables pointing at a running stand-in, with its OAuth client. */
export const googleServiceEnv = (sandbox: Pick<RunningGoogleSandbox, 'apiBase' | 'authUrl' | 'tokenUrl' | 'revokeUrl'>): Record<string, string> => ({
  GOOGLE_API_BASE: sandbox.apiBase,
  GOOGLE_AUTH_URL: sandbox.authUrl,
  GOOGLE_TOKEN_URL: sandbox.tokenUrl,
  GOOGLE_REVOKE_URL: sandbox.revokeUrl,
  GOOGLE_CLIENT_ID: GOOGLE_APP.id,
  GOOGLE_CLIENT_SECRET: GOOGLE_APP.secret,
});

export async function startGoogleSandbox(opts: { accessTtlSeconds?: number; now?: () => number } = {}): Promise<RunningGoogleSandbox> {
  const app = await buildGoogleSandbox(opts);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  return {
    url,
    apiBase: `${url}/v1`,
    authUrl: `${url}/o/oauth2/v2/auth`,
    tokenUrl: `${url}/token`,
    revokeUrl: `${url}/revoke`,
    controlUrl: `${url}/_control`,
    app,
    close: () => app.close().then(() => undefined),
  };
}
