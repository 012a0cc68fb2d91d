/**
 * The admin API takes JSON bodies as typed (no coercion), query strings as text read into numbers, and every route
 * of the service refuses a request with two Authorization headers. The whole service, in memory, over a socket.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../shared/config.js';
import { silentLogger } from '../shared/logger.js';
import { startService, type RunningService } from './service.js';

const ADMIN = 'strict-admin-token-0123456789';
let service: RunningService;
let port: number;
let ws: string;
let key: string;

const admin = (method: string, url: string, payload?: unknown) =>
  service.app.inject({ method: method as 'GET', url, headers: { authorization: `Bearer ${ADMIN}` }, ...(payload === undefined ? {} : { payload: payload as object }) });

/** One raw HTTP/1.1 request (headers exactly as given, repeats included); the status and body of the answer. */
function raw(lines: string[], body = ''): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.on('data', (d) => (text += d.toString('utf8')));
    socket.on('end', () => {
      const [head, ...rest] = text.split('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head!)![1]), body: rest.join('\r\n\r\n') });
    });
    socket.on('error', reject);
    socket.write([...lines, `content-length: ${Buffer.byteLength(body)}`, 'connection: close', '', body].join('\r\n'));
  });
}

beforeAll(async () => {
  const config = loadConfig({ ADMIN_TOKEN: ADMIN, PORT: '0', DATA_DIR: '/tmp/unused-strict', GATEWAY_MAX_EVENT_LOOP_DELAY_MS: '0' });
  service = await startService(config, silentLogger, { inMemoryDb: true });
  await service.app.listen({ port: 0, host: '127.0.0.1' });
  port = (service.app.server.address() as { port: number }).port;
  ws = (await admin('POST', '/admin/v1/workspaces', { name: 'strict', plan: 'enterprise' })).json().id;
  key = (await admin('POST', `/admin/v1/workspaces/${ws}/api-keys`, { mode: 'live' })).json().key;
});
afterAll(async () => service?.close());

describe('admin API bodies are not coerced', () => {
  describe('bad input', () => {
    const range = { from: new Date(Date.now() - 3600_000).toISOString(), to: new Date().toISOString() };
    it.each([
      { name: 'a workspace name false', method: 'POST', url: () => '/admin/v1/workspaces', body: { name: false, plan: 'free' }, field: 'name' },
      { name: 'a workspace name 12', method: 'POST', url: () => '/admin/v1/workspaces', body: { name: 12 }, field: 'name' },
      { name: 'a workspace name in an array', method: 'POST', url: () => '/admin/v1/workspaces', body: { name: ['shop'] }, field: 'name' },
      { name: 'a rename to null', method: 'PATCH', url: () => `/admin/v1/workspaces/${ws}`, body: { name: null }, field: 'name' },
      { name: 'a key mode in an array', method: 'POST', url: () => `/admin/v1/workspaces/${ws}/api-keys`, body: { mode: ['live'] }, field: 'mode' },
      { name: 'dry_run 0', method: 'POST', url: () => `/admin/v1/workspaces/${ws}/replays`, body: { ...range, dry_run: 0 }, field: 'dry_run' },
      { name: 'dry_run "false"', method: 'POST', url: () => `/admin/v1/workspaces/${ws}/replays`, body: { ...range, dry_run: 'false' }, field: 'dry_run' },
      { name: 'resend 1', method: 'POST', url: () => `/admin/v1/workspaces/${ws}/replays`, body: { ...range, resend: 1 }, field: 'resend' },
      { name: 'redrive all "true"', method: 'POST', url: () => `/admin/v1/workspaces/${ws}/dead-letters/redrive`, body: { all: 'true' }, field: 'all' },
    ])('$name: 400 naming the field, nothing done', async ({ method, url, body, field }) => {
      const before = (await admin('GET', '/admin/v1/workspaces?limit=500')).json().items.length;
      const replaysBefore = (await admin('GET', `/admin/v1/workspaces/${ws}/replays`)).body;
      const r = await admin(method, url(), body);
      expect(r.statusCode, r.body).toBe(400);
      expect(r.headers['content-type']).toContain('application/problem+json');
      expect(r.json().detail).toContain(field);
      expect((await admin('GET', '/admin/v1/workspaces?limit=500')).json().items.length).toBe(before);
      expect((await admin('GET', `/admin/v1/workspaces/${ws}/replays`)).body).toBe(replaysBefore);
    });
  });

  it.each([
    { name: 'a number', query: '?limit=1', status: 200 },
    { name: 'a number with a sign', query: '?limit=+1', status: 200 },
    { name: 'not a number', query: '?limit=one', status: 400 },
    { name: 'a fraction', query: '?limit=1.5', status: 400 },
  ])('a query string is text read as its type: $name', async ({ query, status }) => {
    expect((await admin('GET', `/admin/v1/workspaces${query}`)).statusCode).toBe(status);
  });
});

describe('one Authorization header', () => {
  const event = JSON.stringify([
    {
      event_name: 'page_view',
      event_source: 'web',
      event_data: {},
      event_metadata: { idempotency_key: 'dup-auth-1', consent: { ad_storage: 'granted', analytics_storage: 'granted', ad_user_data: 'granted', ad_personalization: 'granted' } },
    },
  ]);
  it.each([
    { name: 'admin API, the right token first', lines: () => ['GET /admin/v1/workspaces HTTP/1.1', `authorization: Bearer ${ADMIN}`, 'authorization: Bearer other'] },
    { name: 'admin API, the right token twice', lines: () => ['GET /admin/v1/workspaces HTTP/1.1', `authorization: Bearer ${ADMIN}`, `Authorization: Bearer ${ADMIN}`] },
    { name: 'endpoint A', lines: () => ['POST /v1/events HTTP/1.1', 'content-type: application/json', `authorization: Bearer ${key}`, 'authorization: Bearer x'], body: event },
    { name: 'endpoint B', lines: () => ['POST /v1/sgtm HTTP/1.1', 'content-type: application/json', `authorization: Bearer ${key}`, `authorization: Bearer ${key}`], body: '[]' },
  ])('$name: 400, whichever comes first', async ({ lines, body }) => {
    const [requestLine, ...headers] = lines();
    const r = await raw([requestLine!, 'host: localhost', ...headers], body);
    expect(r.status, r.body).toBe(400);
    expect(r.body, r.body).toMatch(/Authorization/);
  });

  it('one header still works', async () => {
    const r = await raw(['GET /admin/v1/workspaces?limit=1 HTTP/1.1', 'host: localhost', `authorization: Bearer ${ADMIN}`]);
    expect(r.status).toBe(200);
  });
});

describe('a method a route does not take', () => {
  it.each([
    { method: 'PUT', url: '/admin/v1/workspaces', allow: 'GET, HEAD, POST' },
    { method: 'DELETE', url: '/v1/events', allow: 'POST' },
    { method: 'GET', url: '/admin/v1/workspaces/ws_x/dead-letters/redrive', allow: 'POST' },
    { method: 'POST', url: '/healthz', allow: 'GET, HEAD' },
  ])('$method $url: 405 with Allow: $allow', async ({ method, url, allow }) => {
    const r = await service.app.inject({ method: method as 'GET', url, headers: { authorization: `Bearer ${ADMIN}` } });
    expect(r.statusCode, r.body).toBe(405);
    expect(r.headers.allow).toBe(allow);
    expect(r.headers['content-type']).toContain('application/problem+json');
  });

  describe('bad input', () => {
    it.each(['/admin/v1/nothing', '/v1/events/extra', '/admin/v1/workspaces/a/b/c/d'])('%s is no route: 404', async (url) => {
      expect((await service.app.inject({ method: 'PUT', url, headers: { authorization: `Bearer ${ADMIN}` } })).statusCode).toBe(404);
    });
  });
});
