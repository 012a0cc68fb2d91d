import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { API_PREFIX, AUTHORIZE_PATH, PlatformCode } from './codes.js';
import { applyFault } from './faults.js';
import { logCall, sendApi } from './respond.js';
import {
  randomToken,
  type AccessTokenRecord,
  type Grant,
  type RefreshTokenRecord,
  type SandboxState,
} from './state.js';

type Body = Record<string, unknown>;

function bodyOf(request: FastifyRequest): Body {
  const b = request.body;
  return typeof b === 'object' && b !== null && !Array.isArray(b) ? (b as Body) : {};
}

function missingString(body: Body, fields: readonly string[]): string | null {
  for (const f of fields) {
    const v = body[f];
    if (typeof v !== 'string' || v.length === 0) return f;
  }
  return null;
}

function credentialsValid(state: SandboxState, body: Body): boolean {
  return body.app_id === state.appId && body.secret === state.appSecret;
}

// ---------------------------------------------------------------- tokens

export type AuthResult = { ok: true; grant: Grant; token: AccessTokenRecord } | { ok: false; code: number };

/** Resolve the Access-Token header to a live grant, or the code the platform answers with. */
export function authenticate(state: SandboxState, header: string | string[] | undefined): AuthResult {
  const value = Array.isArray(header) ? header[0] : header;
  if (!value) return { ok: false, code: PlatformCode.ACCESS_TOKEN_EMPTY };
  const token = state.accessTokens.get(value);
  const grant = token ? state.grants.get(token.grant_id) : undefined;
  if (!token || !grant || grant.revoked_at !== null) return { ok: false, code: PlatformCode.ACCESS_TOKEN_INVALID };
  if (token.expires_at !== null && state.now() >= token.expires_at) {
    return { ok: false, code: PlatformCode.ACCESS_TOKEN_EXPIRED };
  }
  return { ok: true, grant, token };
}

function issueAccess(state: SandboxState, grantId: string): AccessTokenRecord {
  const now = state.now();
  const s = state.settings;
  const record: AccessTokenRecord = {
    token: randomToken(),
    grant_id: grantId,
    issued_at: now,
    expires_at: s.non_expiring ? null : now + s.access_ttl_seconds * 1000,
  };
  state.accessTokens.set(record.token, record);
  return record;
}

function issueRefresh(state: SandboxState, grantId: string): RefreshTokenRecord {
  const now = state.now();
  const record: RefreshTokenRecord = {
    token: randomToken(),
    grant_id: grantId,
    issued_at: now,
    expires_at: now + state.settings.refresh_ttl_seconds * 1000,
    rotated_at: null,
  };
  state.refreshTokens.set(record.token, record);
  return record;
}

function secondsLeft(state: SandboxState, at: number): number {
  return Math.max(0, Math.ceil((at - state.now()) / 1000));
}

function tokenData(
  state: SandboxState,
  grant: Grant,
  access: AccessTokenRecord,
  refresh: RefreshTokenRecord | null,
): Record<string, unknown> {
  const data: Record<string, unknown> = {
    access_token: access.token,
    advertiser_ids: [...grant.advertiser_ids],
    scope: [...grant.scope],
  };
  if (access.expires_at !== null) data.expires_in = secondsLeft(state, access.expires_at);
  if (refresh) {
    data.refresh_token = refresh.token;
    data.refresh_token_expires_in = secondsLeft(state, refresh.expires_at);
  }
  return data;
}

export function revokeGrant(state: SandboxState, grantId: string): boolean {
  const grant = state.grants.get(grantId);
  if (!grant || grant.revoked_at !== null) return false;
  grant.revoked_at = state.now();
  return true;
}

/** PKCE check (RFC 7636): S256 compares base64url(sha256(verifier)) with the stored challenge. */
export function verifierMatches(challenge: string, method: 'S256' | 'plain', verifier: string): boolean {
  if (method === 'plain') return verifier === challenge;
  return createHash('sha256').update(verifier).digest('base64url') === challenge;
}

// ---------------------------------------------------------------- authorize page

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);
}

function errorPage(state: SandboxState, request: FastifyRequest, reply: FastifyReply, message: string): FastifyReply {
  logCall(state, request, { code: null, http_status: 400, endpoint: 'authorize' });
  const html =
    '<!doctype html><html><head><meta charset="utf-8"><title>Authorization error</title></head>' +
    `<body><h1>Authorization error</h1><p>${escapeHtml(message)}</p></body></html>`;
  return reply.code(400).type('text/html; charset=utf-8').send(html);
}

function redirectTo(state: SandboxState, request: FastifyRequest, reply: FastifyReply, target: URL): FastifyReply {
  logCall(state, request, { code: null, http_status: 302, endpoint: 'authorize' });
  return reply.redirect(target.toString(), 302);
}

const PKCE_CHALLENGE = /^[A-Za-z0-9\-._~]{43,128}$/;

function authorize(state: SandboxState, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const q = request.query as Record<string, string | undefined>;
  const appId = q.app_id;
  if (!appId || appId !== state.appId) return errorPage(state, request, reply, `Unknown app_id: ${appId ?? '(missing)'}`);
  const redirectRaw = q.redirect_uri;
  let redirect: URL;
  try {
    redirect = new URL(redirectRaw ?? '');
  } catch {
    return errorPage(state, request, reply, 'redirect_uri is missing or not an absolute URL');
  }
  if (redirect.protocol !== 'http:' && redirect.protocol !== 'https:') {
    return errorPage(state, request, reply, 'redirect_uri must be an http(s) URL');
  }
  const bare = `${redirect.origin}${redirect.pathname}`;
  if (state.redirectUris && !state.redirectUris.includes(bare)) {
    return errorPage(state, request, reply, `redirect_uri is not registered for this app: ${bare}`);
  }
  const challenge = q.code_challenge ?? null;
  let method: 'S256' | 'plain' | null = null;
  if (challenge !== null) {
    const m = q.code_challenge_method ?? 'plain';
    if (m !== 'S256' && m !== 'plain') return errorPage(state, request, reply, `Unsupported code_challenge_method: ${m}`);
    if (!PKCE_CHALLENGE.test(challenge)) return errorPage(state, request, reply, 'Malformed code_challenge');
    method = m;
  }
  const target = new URL(redirect.toString());
  if (state.settings.deny_authorize) {
    target.searchParams.set('error', 'access_denied');
    target.searchParams.set('error_description', 'The user denied the authorization request.');
    if (q.state !== undefined) target.searchParams.set('state', q.state);
    return redirectTo(state, request, reply, target);
  }
  const code = randomToken(16);
  state.codes.set(code, {
    code,
    redirect_uri: redirect.toString(),
    code_challenge: challenge,
    code_challenge_method: method,
    advertiser_ids: [...state.settings.advertiser_ids],
    expires_at: state.now() + state.authCodeTtlMs,
    used: false,
  });
  target.searchParams.set('auth_code', code);
  target.searchParams.set('code', code);
  if (q.state !== undefined) target.searchParams.set('state', q.state);
  return redirectTo(state, request, reply, target);
}

// ---------------------------------------------------------------- token endpoints

async function accessToken(state: SandboxState, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const endpoint = 'token' as const;
  if (await applyFault(state, endpoint, request, reply)) return reply;
  const body = bodyOf(request);
  const missing = missingString(body, ['app_id', 'secret', 'auth_code']);
  if (missing) return sendApi(state, request, reply, { endpoint, code: PlatformCode.PARAM_ERROR, message: `${missing}: required` });
  if (!credentialsValid(state, body)) return sendApi(state, request, reply, { endpoint, code: PlatformCode.APP_AUTH_FAILED });
  const code = state.codes.get(body.auth_code as string);
  if (!code || code.used) {
    return sendApi(state, request, reply, { endpoint, code: PlatformCode.AUTH_CODE_INVALID });
  }
  code.used = true;
  if (state.now() >= code.expires_at) {
    return sendApi(state, request, reply, { endpoint, code: PlatformCode.AUTH_CODE_INVALID, message: 'auth_code invalid: expired.' });
  }
  const verifier = body.code_verifier;
  if (code.code_challenge !== null && code.code_challenge_method !== null && verifier !== undefined) {
    if (typeof verifier !== 'string' || !verifierMatches(code.code_challenge, code.code_challenge_method, verifier)) {
      return sendApi(state, request, reply, {
        endpoint,
        code: PlatformCode.AUTH_CODE_INVALID,
        message: 'auth_code invalid: code_verifier does not match code_challenge.',
      });
    }
  }
  const grant: Grant = {
    id: randomToken(8),
    advertiser_ids: [...code.advertiser_ids],
    scope: [...state.scope],
    created_at: state.now(),
    revoked_at: null,
  };
  state.grants.set(grant.id, grant);
  const access = issueAccess(state, grant.id);
  const refresh = access.expires_at === null ? null : issueRefresh(state, grant.id);
  return sendApi(state, request, reply, { endpoint, data: tokenData(state, grant, access, refresh) });
}

async function refreshToken(state: SandboxState, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const endpoint = 'refresh' as const;
  if (await applyFault(state, endpoint, request, reply)) return reply;
  const body = bodyOf(request);
  const missing = missingString(body, ['app_id', 'secret', 'refresh_token']);
  if (missing) return sendApi(state, request, reply, { endpoint, code: PlatformCode.PARAM_ERROR, message: `${missing}: required` });
  if (!credentialsValid(state, body)) return sendApi(state, request, reply, { endpoint, code: PlatformCode.APP_AUTH_FAILED });
  const old = state.refreshTokens.get(body.refresh_token as string);
  const grant = old ? state.grants.get(old.grant_id) : undefined;
  if (!old || !grant) return sendApi(state, request, reply, { endpoint, code: PlatformCode.REFRESH_TOKEN_INVALID });
  if (old.rotated_at !== null) {
    if (state.settings.revoke_grant_on_refresh_reuse) revokeGrant(state, grant.id);
    return sendApi(state, request, reply, {
      endpoint,
      code: PlatformCode.REFRESH_TOKEN_INVALID,
      message: 'Invalid refresh token: it has already been rotated.',
    });
  }
  if (grant.revoked_at !== null) {
    return sendApi(state, request, reply, {
      endpoint,
      code: PlatformCode.REFRESH_TOKEN_INVALID,
      message: 'Invalid refresh token: the authorization has been revoked.',
    });
  }
  if (state.now() >= old.expires_at) return sendApi(state, request, reply, { endpoint, code: PlatformCode.REFRESH_TOKEN_EXPIRED });
  const access = issueAccess(state, grant.id);
  let refresh: RefreshTokenRecord | null = old;
  if (state.settings.rotate_refresh || access.expires_at === null) {
    old.rotated_at = state.now();
    refresh = access.expires_at === null ? null : issueRefresh(state, grant.id);
  }
  return sendApi(state, request, reply, { endpoint, data: tokenData(state, grant, access, refresh) });
}

async function revokeToken(state: SandboxState, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const endpoint = 'revoke' as const;
  if (await applyFault(state, endpoint, request, reply)) return reply;
  const body = bodyOf(request);
  const tokenValue = typeof body.access_token === 'string' ? body.access_token : '';
  const record = (outcome: string, code: number) =>
    state.revocations.push({ at: new Date(state.now()).toISOString(), access_token: tokenValue, outcome, code });
  const missing = missingString(body, ['app_id', 'secret', 'access_token']);
  if (missing) {
    record('bad_request', PlatformCode.PARAM_ERROR);
    return sendApi(state, request, reply, { endpoint, code: PlatformCode.PARAM_ERROR, message: `${missing}: required` });
  }
  if (!credentialsValid(state, body)) {
    record('bad_credentials', PlatformCode.APP_AUTH_FAILED);
    return sendApi(state, request, reply, { endpoint, code: PlatformCode.APP_AUTH_FAILED });
  }
  const token = state.accessTokens.get(tokenValue);
  if (!token) {
    record('unknown_token', PlatformCode.ACCESS_TOKEN_INVALID);
    return sendApi(state, request, reply, { endpoint, code: PlatformCode.ACCESS_TOKEN_INVALID });
  }
  const revoked = revokeGrant(state, token.grant_id);
  record(revoked ? 'revoked' : 'already_revoked', PlatformCode.OK);
  return sendApi(state, request, reply, { endpoint, data: {} });
}

export function registerOAuthRoutes(app: FastifyInstance, state: SandboxState): void {
  app.get(AUTHORIZE_PATH, async (request, reply) => authorize(state, request, reply));
  app.post(`${API_PREFIX}/oauth2/access_token/`, async (request, reply) => accessToken(state, request, reply));
  app.post(`${API_PREFIX}/oauth2/refresh_token/`, async (request, reply) => refreshToken(state, request, reply));
  app.post(`${API_PREFIX}/oauth2/revoke_token/`, async (request, reply) => revokeToken(state, request, reply));
}
