import type { FastifyInstance, FastifyReply } from 'fastify';
import { enqueueFaults, parseFaults } from './faults.js';
import { revokeGrant } from './oauth.js';
import { resetState, type SandboxSettings, type SandboxState } from './state.js';

export const CONTROL_PREFIX = '/_control';

type Obj = Record<string, unknown>;

function isPositiveInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v > 0;
}

function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/** Apply a partial settings update; returns an error message, or null when applied. Nothing changes on error. */
export function applySettings(state: SandboxState, body: unknown): string | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'body must be an object';
  const next: SandboxSettings = { ...state.settings, advertiser_ids: [...state.settings.advertiser_ids] };
  for (const [key, v] of Object.entries(body as Obj)) {
    switch (key) {
      case 'access_ttl_seconds':
        if (v === null) next.non_expiring = true;
        else if (isPositiveInt(v)) next.access_ttl_seconds = v;
        else return 'access_ttl_seconds: must be a positive integer or null (non-expiring)';
        break;
      case 'refresh_ttl_seconds':
        if (!isPositiveInt(v)) return 'refresh_ttl_seconds: must be a positive integer';
        next.refresh_ttl_seconds = v;
        break;
      case 'rotate_refresh':
      case 'non_expiring':
      case 'deny_authorize':
      case 'revoke_grant_on_refresh_reuse':
        if (typeof v !== 'boolean') return `${key}: must be a boolean`;
        next[key] = v;
        break;
      case 'timezone':
        if (typeof v !== 'string' || !isTimeZone(v)) return 'timezone: must be an IANA time zone name';
        next.timezone = v;
        break;
      case 'advertiser_ids':
        if (!Array.isArray(v) || v.length === 0 || !v.every((id) => typeof id === 'string' && /^\d+$/.test(id))) {
          return 'advertiser_ids: must be a non-empty array of numeric strings';
        }
        next.advertiser_ids = [...(v as string[])];
        break;
      default:
        return `${key}: unknown setting`;
    }
  }
  state.settings = next;
  return null;
}

function validTokens(state: SandboxState) {
  const now = state.now();
  const live = (grantId: string) => state.grants.get(grantId)?.revoked_at === null;
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  const access = [...state.accessTokens.values()]
    .filter((t) => live(t.grant_id) && (t.expires_at === null || now < t.expires_at))
    .map((t) => ({
      access_token: t.token,
      grant_id: t.grant_id,
      advertiser_ids: [...(state.grants.get(t.grant_id)?.advertiser_ids ?? [])],
      issued_at: iso(t.issued_at),
      expires_at: iso(t.expires_at),
    }));
  const refresh = [...state.refreshTokens.values()]
    .filter((t) => live(t.grant_id) && t.rotated_at === null && now < t.expires_at)
    .map((t) => ({ refresh_token: t.token, grant_id: t.grant_id, issued_at: iso(t.issued_at), expires_at: iso(t.expires_at) }));
  return { count: access.length, access_tokens: access, refresh_tokens: refresh };
}

function badRequest(reply: FastifyReply, error: string): FastifyReply {
  return reply.code(400).send({ error });
}

export function registerControlRoutes(app: FastifyInstance, state: SandboxState): void {
  const p = CONTROL_PREFIX;

  app.get(`${p}/received`, async (request) => {
    const q = request.query as Record<string, string | undefined>;
    const events = state.received.filter(
      (e) =>
        (q.event_id === undefined || e.record.event_id === q.event_id) &&
        (q.event_source_id === undefined || e.event_source_id === q.event_source_id) &&
        (q.test_event_code === undefined || e.test_event_code === q.test_event_code),
    );
    return { count: events.length, events };
  });
  app.delete(`${p}/received`, async () => {
    const cleared = state.received.length;
    state.received = [];
    return { cleared };
  });

  app.get(`${p}/calls`, async (request) => {
    const q = request.query as Record<string, string | undefined>;
    const calls = state.calls.filter(
      (c) => (q.path === undefined || c.path === q.path) && (q.endpoint === undefined || c.endpoint === q.endpoint),
    );
    return { count: calls.length, calls };
  });
  app.delete(`${p}/calls`, async () => {
    const cleared = state.calls.length;
    state.calls = [];
    return { cleared };
  });

  app.get(`${p}/revocations`, async () => ({ count: state.revocations.length, revocations: state.revocations }));

  app.get(`${p}/faults`, async () => ({ faults: state.faults }));
  // Calls held in a delay fault at this moment, per endpoint (a test can kill its client while one is on the wire).
  app.get(`${p}/delayed`, async () => ({ delayed: state.delayed }));
  app.post(`${p}/faults`, async (request, reply) => {
    const parsed = parseFaults(request.body);
    if (!parsed.ok) return badRequest(reply, parsed.error);
    enqueueFaults(state, parsed.faults);
    return { faults: state.faults };
  });
  app.delete(`${p}/faults`, async () => {
    for (const list of Object.values(state.faults)) list.length = 0;
    return { faults: state.faults };
  });

  app.get(`${p}/settings`, async () => ({ settings: state.settings }));
  app.post(`${p}/settings`, async (request, reply) => {
    const error = applySettings(state, request.body);
    if (error) return badRequest(reply, error);
    return { settings: state.settings };
  });

  app.post(`${p}/revoke-all`, async () => {
    let revoked = 0;
    for (const grant of state.grants.values()) if (revokeGrant(state, grant.id)) revoked += 1;
    return { revoked };
  });

  app.post(`${p}/expire-access-tokens`, async () => {
    const now = state.now();
    let expired = 0;
    for (const t of state.accessTokens.values()) {
      if (t.expires_at === null || t.expires_at > now) {
        t.expires_at = now;
        expired += 1;
      }
    }
    return { expired };
  });

  app.get(`${p}/tokens`, async () => validTokens(state));

  app.post(`${p}/reset`, async () => {
    resetState(state);
    return { reset: true };
  });
}
