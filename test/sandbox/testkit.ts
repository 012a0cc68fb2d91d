/**
 * Helpers for driving a sandbox in-process (via `app.inject`): used by the sandbox's own tests and available to
 * other test suites that need a ready token without a browser.
 */
import { createHash } from 'node:crypto';
import type { SandboxApp } from './app.js';
import { API_PREFIX, AUTHORIZE_PATH } from './codes.js';
import type { Envelope } from './respond.js';

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

export interface TokenData {
  access_token: string;
  advertiser_ids: string[];
  scope: string[];
  expires_in?: number;
  refresh_token?: string;
  refresh_token_expires_in?: number;
}

export const REDIRECT_URI = 'http://127.0.0.1:1/oauth/callback';

/** Run the authorize page and return the auth_code from the redirect. */
export async function authorizeCode(
  app: SandboxApp,
  extra: Record<string, string> = {},
): Promise<{ code: string; location: URL }> {
  const query = new URLSearchParams({ app_id: app.sandbox.appId, state: 'st-1', redirect_uri: REDIRECT_URI, ...extra });
  const res = await app.inject({ method: 'GET', url: `${AUTHORIZE_PATH}?${query}` });
  if (res.statusCode !== 302) throw new Error(`authorize answered ${res.statusCode}: ${res.body}`);
  const location = new URL(String(res.headers.location));
  const code = location.searchParams.get('auth_code');
  if (!code) throw new Error(`authorize redirect has no auth_code: ${location}`);
  return { code, location };
}

export async function postApi<T = Record<string, unknown>>(
  app: SandboxApp,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Envelope<T>; headers: Record<string, unknown> }> {
  const res = await app.inject({ method: 'POST', url: `${API_PREFIX}${path}`, payload: body as object, headers });
  return { status: res.statusCode, body: res.json<Envelope<T>>(), headers: res.headers };
}

export async function exchangeCode(app: SandboxApp, code: string, extra: Record<string, string> = {}) {
  return postApi<TokenData>(app, '/oauth2/access_token/', {
    app_id: app.sandbox.appId,
    secret: app.sandbox.appSecret,
    auth_code: code,
    ...extra,
  });
}

/** Authorize and exchange the code: the tokens a freshly connected customer would hold. */
export async function obtainTokens(app: SandboxApp): Promise<TokenData> {
  const { code } = await authorizeCode(app);
  const res = await exchangeCode(app, code);
  if (res.body.code !== 0) throw new Error(`token exchange failed: ${JSON.stringify(res.body)}`);
  return res.body.data;
}

export async function refresh(app: SandboxApp, refreshToken: string) {
  return postApi<TokenData>(app, '/oauth2/refresh_token/', {
    app_id: app.sandbox.appId,
    secret: app.sandbox.appSecret,
    refresh_token: refreshToken,
  });
}

export function validRecord(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    event: 'Purchase',
    event_id: 'evt-1',
    event_time: 1_767_225_600,
    user: {
      email: [sha256Hex('jane@example.com')],
      phone: [sha256Hex('+15551234567')],
      external_id: [sha256Hex('customer-42')],
      ttclid: 'E.C.P.abc',
      user_agent: 'Mozilla/5.0',
      ip: '203.0.113.7',
    },
    page: { url: 'https://shop.example/checkout' },
    properties: { value: 42.5, currency: 'USD', contents: [{ content_id: 'sku-1', quantity: 1 }] },
    limited_data_use: false,
    ...overrides,
  };
}

export function trackBody(records: unknown[], overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { event_source: 'WEB', event_source_id: 'PIXEL123', data: records, ...overrides };
}

export async function track(app: SandboxApp, accessToken: string | null, body: unknown) {
  return postApi(app, '/event/track/', body, accessToken === null ? {} : { 'access-token': accessToken });
}
