/**
 * A stand-in for Meta's Graph API as the Conversions API uses it, built from Meta's public documentation: the
 * login dialog, the code exchange and the long-lived token exchange (`grant_type=fb_exchange_token`), the pixel,
 * `POST /{pixel_id}/events` (validate.ts) and `DELETE /me/permissions`. Errors come as Graph errors:
 * HTTP 400 (or the status a fault names) with `{"error": {message, type, code, error_subcode, is_transient,
 * error_user_title, error_user_msg, fbtrace_id}}`. Its control API (`/_control`) injects faults and shows what
 * arrived. All state is in memory, one object per instance.
 */
import { createHmac, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { validateEventsBody } from './validate.js';

export const META_VERSION = 'v21.0';
export const META_APP = { id: 'meta-app', secret: 'meta-secret' } as const;

export const META_FAULT_KEYS = ['events', 'exchange', 'revoke', 'pixel'] as const;
export type MetaFaultKey = (typeof META_FAULT_KEYS)[number];

export interface MetaFault {
  http_status?: number;
  code?: number;
  error_subcode?: number;
  message?: string;
  is_transient?: boolean;
  delay_ms?: number;
  /** Only calls for this pixel (events and pixel endpoints); others pass untouched. */
  pixel_id?: string;
  times: number;
}

interface Token {
  readonly kind: 'short' | 'long';
  readonly expiresAt: number;
  /** Set by a revocation (DELETE /me/permissions) or by the control API. */
  invalid: null | 'revoked' | 'expired';
}

export interface MetaReceived {
  readonly pixel_id: string;
  readonly test_event_code: string | null;
  readonly fbtrace_id: string;
  readonly event: Record<string, unknown>;
}

export interface MetaCall {
  readonly endpoint: MetaFaultKey | 'dialog';
  readonly http_status: number;
  readonly code: number | null;
  readonly events: number;
}

export interface MetaSandboxOptions {
  readonly pixels?: readonly string[];
  readonly shortTtlSeconds?: number;
  readonly longTtlSeconds?: number;
  readonly now?: () => number;
}

export interface MetaState {
  readonly pixels: Set<string>;
  readonly codes: Map<string, { redirectUri: string; expiresAt: number }>;
  readonly tokens: Map<string, Token>;
  faults: Record<MetaFaultKey, MetaFault[]>;
  received: MetaReceived[];
  calls: MetaCall[];
  denyAuthorize: boolean;
  readonly now: () => number;
  readonly shortTtl: number;
  readonly longTtl: number;
}

const traceId = (): string => randomBytes(9).toString('base64url');
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function graphError(
  state: MetaState,
  reply: FastifyReply,
  endpoint: MetaCall['endpoint'],
  e: { http?: number; code: number; subcode?: number; message: string; title?: string; userMessage?: string; transient?: boolean; events?: number },
): FastifyReply {
  const http = e.http ?? 400;
  state.calls.push({ endpoint, http_status: http, code: e.code, events: e.events ?? 0 });
  return reply.code(http).send({
    error: {
      message: e.message,
      type: e.code === 190 || e.code === 102 ? 'OAuthException' : 'GraphMethodException',
      code: e.code,
      ...(e.subcode === undefined ? {} : { error_subcode: e.subcode }),
      is_transient: e.transient ?? false,
      ...(e.title === undefined ? {} : { error_user_title: e.title }),
      ...(e.userMessage === undefined ? {} : { error_user_msg: e.userMessage }),
      fbtrace_id: traceId(),
    },
  });
}

/** The next queued fault of an endpoint: answers the call (true), or only delays it (false). */
async function applyFault(state: MetaState, key: MetaFaultKey, reply: FastifyReply, events = 0, pixel?: string): Promise<boolean> {
  const queue = state.faults[key];
  const at = queue.findIndex((f) => f.pixel_id === undefined || f.pixel_id === pixel);
  const head = at === -1 ? undefined : queue[at];
  if (!head) return false;
  head.times -= 1;
  if (head.times <= 0) queue.splice(at, 1);
  if (head.delay_ms) await sleep(head.delay_ms);
  if (head.code === undefined && head.http_status === undefined) return false;
  graphError(state, reply, key, {
    http: head.http_status ?? 400,
    code: head.code ?? 1,
    subcode: head.error_subcode,
    message: head.message ?? 'An unknown error occurred',
    transient: head.is_transient,
    events,
  });
  return true;
}

/** The token of a call: `access_token` in the body or query, or `Authorization: Bearer|OAuth <token>`. */
function tokenOf(request: FastifyRequest): string | null {
  const auth = request.headers.authorization;
  const m = typeof auth === 'string' ? /^(?:Bearer|OAuth)\s+(\S+)$/i.exec(auth) : null;
  if (m) return m[1]!;
  const q = request.query as Record<string, unknown>;
  if (typeof q.access_token === 'string') return q.access_token;
  const b = request.body;
  if (isObj(b) && typeof b.access_token === 'string') return b.access_token;
  return null;
}

/** Null when the token is good; else the Graph error it earns (code 190, subcode 463 expired, 460 invalidated). */
function tokenProblem(state: MetaState, token: string | null, request?: FastifyRequest): { code: number; subcode?: number; message: string } | null {
  // appsecret_proof is optional, as when the app does not require it; when sent it must be the token's HMAC.
  const proof = request ? (request.query as Record<string, unknown>).appsecret_proof : undefined;
  if (token !== null && proof !== undefined && proof !== createHmac('sha256', META_APP.secret).update(token).digest('hex')) {
    return { code: 100, message: 'Invalid appsecret_proof provided in the API argument' };
  }
  const t = token === null ? undefined : state.tokens.get(token);
  if (!t) return { code: 190, message: 'Invalid OAuth access token - Cannot parse access token' };
  if (t.invalid === 'revoked') {
    return { code: 190, subcode: 460, message: 'Error validating access token: The session has been invalidated because the user changed their password or Facebook has changed the session for security reasons.' };
  }
  if (t.invalid === 'expired' || t.expiresAt <= state.now()) {
    return { code: 190, subcode: 463, message: 'Error validating access token: Session has expired.' };
  }
  return null;
}

function issue(state: MetaState, kind: Token['kind']): { access_token: string; token_type: 'bearer'; expires_in: number } {
  const ttl = kind === 'short' ? state.shortTtl : state.longTtl;
  const access = `EAA${randomBytes(24).toString('base64url')}`;
  state.tokens.set(access, { kind, expiresAt: state.now() + ttl * 1000, invalid: null });
  return { access_token: access, token_type: 'bearer', expires_in: ttl };
}

function parseFaults(body: unknown): Partial<Record<MetaFaultKey, MetaFault[]>> | string {
  if (!isObj(body)) return 'body must be an object';
  const out: Partial<Record<MetaFaultKey, MetaFault[]>> = {};
  for (const [key, list] of Object.entries(body)) {
    if (!(META_FAULT_KEYS as readonly string[]).includes(key)) return `${key}: unknown endpoint key (expected one of ${META_FAULT_KEYS.join(', ')})`;
    if (!Array.isArray(list)) return `${key}: must be an array of faults`;
    const faults: MetaFault[] = [];
    for (const [i, f] of list.entries()) {
      if (!isObj(f)) return `${key}[${i}]: must be an object`;
      const int = (k: string, min: number, max: number): boolean =>
        f[k] === undefined || (typeof f[k] === 'number' && Number.isInteger(f[k]) && (f[k] as number) >= min && (f[k] as number) <= max);
      if (!int('http_status', 100, 599) || !int('code', 1, 1e9) || !int('error_subcode', 1, 1e9) || !int('delay_ms', 0, 120_000) || !int('times', 1, 1e6)) {
        return `${key}[${i}]: http_status, code, error_subcode, delay_ms and times must be integers in range`;
      }
      if (f.http_status === undefined && f.code === undefined && f.delay_ms === undefined) return `${key}[${i}]: needs http_status, code or delay_ms`;
      if (f.pixel_id !== undefined && typeof f.pixel_id !== 'string') return `${key}[${i}].pixel_id: must be a string`;
      faults.push({ ...(f as Omit<MetaFault, 'times'>), times: (f.times as number | undefined) ?? 1 });
    }
    out[key as MetaFaultKey] = faults;
  }
  return out;
}

export type MetaSandboxApp = FastifyInstance & { readonly meta: MetaState };

export function buildMetaSandbox(opts: MetaSandboxOptions = {}): MetaSandboxApp {
  const state: MetaState = {
    pixels: new Set(opts.pixels ?? ['1234567890']),
    codes: new Map(),
    tokens: new Map(),
    faults: { events: [], exchange: [], revoke: [], pixel: [] },
    received: [],
    calls: [],
    denyAuthorize: false,
    now: opts.now ?? Date.now,
    shortTtl: opts.shortTtlSeconds ?? 2 * 3600,
    longTtl: opts.longTtlSeconds ?? 60 * 24 * 3600,
  };
  const app: FastifyInstance = Fastify({ logger: false, bodyLimit: 16 * 1024 * 1024, forceCloseConnections: true });
  app.decorate('meta', state);
  const v = `/${META_VERSION}`;

  // The login dialog: approves at once (or denies, by setting), then sends the browser back with a code.
  app.get(`${v}/dialog/oauth`, async (request, reply) => {
    const q = request.query as Record<string, string | undefined>;
    if (q.client_id !== META_APP.id || !q.redirect_uri || !/^https?:\/\//.test(q.redirect_uri)) {
      state.calls.push({ endpoint: 'dialog', http_status: 400, code: null, events: 0 });
      return reply.code(400).type('text/html').send('<h1>Invalid App ID or redirect_uri</h1>');
    }
    const back = new URL(q.redirect_uri);
    if (state.denyAuthorize) {
      back.searchParams.set('error', 'access_denied');
      back.searchParams.set('error_reason', 'user_denied');
      back.searchParams.set('error_description', 'Permissions error');
    } else {
      const code = `AQ${randomBytes(24).toString('base64url')}`;
      state.codes.set(code, { redirectUri: q.redirect_uri, expiresAt: state.now() + 10 * 60_000 });
      back.searchParams.set('code', code);
    }
    if (q.state !== undefined) back.searchParams.set('state', q.state);
    state.calls.push({ endpoint: 'dialog', http_status: 302, code: null, events: 0 });
    return reply.redirect(back.toString(), 302);
  });

  // The code exchange (short-lived token) and the long-lived token exchange share one path, as on Graph.
  app.get(`${v}/oauth/access_token`, async (request, reply) => {
    if (await applyFault(state, 'exchange', reply)) return reply;
    const q = request.query as Record<string, string | undefined>;
    if (q.client_id !== META_APP.id || q.client_secret !== META_APP.secret) {
      return graphError(state, reply, 'exchange', { code: 1, message: 'Error validating client secret.' });
    }
    if (q.grant_type === 'fb_exchange_token') {
      const problem = tokenProblem(state, q.fb_exchange_token ?? null);
      if (problem) return graphError(state, reply, 'exchange', problem);
      state.calls.push({ endpoint: 'exchange', http_status: 200, code: 0, events: 0 });
      return issue(state, 'long');
    }
    const grant = q.code === undefined ? undefined : state.codes.get(q.code);
    if (q.code !== undefined) state.codes.delete(q.code); // single use, as on Graph
    if (!grant || grant.expiresAt <= state.now()) {
      return graphError(state, reply, 'exchange', { code: 100, subcode: 36007, message: 'Invalid verification code format.' });
    }
    if (grant.redirectUri !== q.redirect_uri) {
      return graphError(state, reply, 'exchange', { code: 100, subcode: 36008, message: 'Error validating verification code. Please make sure your redirect_uri is identical to the one you used in the OAuth dialog request' });
    }
    state.calls.push({ endpoint: 'exchange', http_status: 200, code: 0, events: 0 });
    return issue(state, 'short');
  });

  app.delete(`${v}/me/permissions`, async (request, reply) => {
    if (await applyFault(state, 'revoke', reply)) return reply;
    const token = tokenOf(request);
    const problem = tokenProblem(state, token, request);
    if (problem) return graphError(state, reply, 'revoke', problem);
    // The user removed the app: every token the app holds for them stops working.
    for (const t of state.tokens.values()) t.invalid = 'revoked';
    state.calls.push({ endpoint: 'revoke', http_status: 200, code: 0, events: 0 });
    return { success: true };
  });

  const unknownObject = (id: string) => ({
    code: 100,
    subcode: 33,
    message: `Unsupported post request. Object with ID '${id}' does not exist, cannot be loaded due to missing permissions, or does not support this operation.`,
  });

  app.get(`${v}/:pixel`, async (request, reply) => {
    const { pixel } = request.params as { pixel: string };
    if (await applyFault(state, 'pixel', reply, 0, pixel)) return reply;
    const problem = tokenProblem(state, tokenOf(request), request);
    if (problem) return graphError(state, reply, 'pixel', problem);
    if (!state.pixels.has(pixel)) return graphError(state, reply, 'pixel', unknownObject(pixel));
    state.calls.push({ endpoint: 'pixel', http_status: 200, code: 0, events: 0 });
    return { id: pixel, name: `Pixel ${pixel}` };
  });

  app.post(`${v}/:pixel/events`, async (request, reply) => {
    const { pixel } = request.params as { pixel: string };
    const body = request.body;
    const events = isObj(body) && Array.isArray(body.data) ? body.data.length : 0;
    if (await applyFault(state, 'events', reply, events, pixel)) return reply;
    const problem = tokenProblem(state, tokenOf(request), request);
    if (problem) return graphError(state, reply, 'events', { ...problem, events });
    if (!state.pixels.has(pixel)) return graphError(state, reply, 'events', { ...unknownObject(pixel), events });
    const bad = validateEventsBody(body, Math.floor(state.now() / 1000));
    if (bad) {
      return graphError(state, reply, 'events', {
        code: 100,
        subcode: bad.subcode,
        message: 'Invalid parameter',
        title: bad.title,
        userMessage: bad.message,
        events,
      });
    }
    const b = body as { data: Array<Record<string, unknown>>; test_event_code?: string };
    const fbtrace = traceId();
    for (const event of b.data) state.received.push({ pixel_id: pixel, test_event_code: b.test_event_code ?? null, fbtrace_id: fbtrace, event });
    state.calls.push({ endpoint: 'events', http_status: 200, code: 0, events });
    return { events_received: b.data.length, messages: [], fbtrace_id: fbtrace };
  });

  // ------------------------------------------------------------------ control (no authentication: loopback only)
  app.post('/_control/faults', async (request, reply) => {
    const parsed = parseFaults(request.body);
    if (typeof parsed === 'string') return reply.code(400).send({ error: parsed });
    for (const key of META_FAULT_KEYS) state.faults[key].push(...(parsed[key] ?? []));
    return { queued: Object.fromEntries(META_FAULT_KEYS.map((k) => [k, state.faults[k].length])) };
  });
  app.delete('/_control/faults', async () => {
    state.faults = { events: [], exchange: [], revoke: [], pixel: [] };
    return { cleared: true };
  });
  app.get('/_control/received', async () => ({ events: state.received }));
  app.get('/_control/calls', async (request) => {
    const q = request.query as { endpoint?: string };
    const calls = q.endpoint ? state.calls.filter((c) => c.endpoint === q.endpoint) : state.calls;
    return { count: calls.length, calls };
  });
  /** Every token stops working as expired: the advertiser must authorise again. */
  app.post('/_control/expire-tokens', async () => {
    let n = 0;
    for (const t of state.tokens.values()) if (t.invalid === null) (t.invalid = 'expired'), (n += 1);
    return { expired: n };
  });
  app.post('/_control/settings', async (request, reply) => {
    const b = request.body;
    if (!isObj(b) || (b.deny_authorize !== undefined && typeof b.deny_authorize !== 'boolean')) {
      return reply.code(400).send({ error: 'deny_authorize must be a boolean' });
    }
    if (typeof b.deny_authorize === 'boolean') state.denyAuthorize = b.deny_authorize;
    return { deny_authorize: state.denyAuthorize };
  });

  return app as MetaSandboxApp;
}

export interface RunningMetaSandbox {
  readonly url: string;
  /** META_API_BASE: `${url}/v21.0` */
  readonly apiBase: string;
  /** META_AUTH_URL: `${url}/v21.0/dialog/oauth` */
  readonly authUrl: string;
  readonly controlUrl: string;
  readonly app: MetaSandboxApp;
  close(): Promise<void>;
}

/** The service's Meta variables pointing at a running stand-in, with its app. */
export const metaServiceEnv = (sandbox: Pick<RunningMetaSandbox, 'apiBase' | 'authUrl'>): Record<string, string> => ({
  META_API_BASE: sandbox.apiBase,
  META_AUTH_URL: sandbox.authUrl,
  META_APP_ID: META_APP.id,
  META_APP_SECRET: META_APP.secret,
});

export async function startMetaSandbox(opts: MetaSandboxOptions & { port?: number } = {}): Promise<RunningMetaSandbox> {
  const { port = 0, ...rest } = opts;
  const app = buildMetaSandbox(rest);
  await app.listen({ port, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  let closing: Promise<void> | null = null;
  return {
    url,
    apiBase: `${url}/${META_VERSION}`,
    authUrl: `${url}/${META_VERSION}/dialog/oauth`,
    controlUrl: `${url}/_control`,
    app,
    close() {
      closing ??= app.close().then(() => undefined);
      return closing;
    },
  };
}
