/**
 * The ingestion interface as a new user meets it: the real service process (`node dist/services/compose/main.js`, as
 * `make run` starts it), the admin API over HTTP, the spec's example requests, the raw log in DATA_DIR, metrics,
 * graceful shutdown, and a bad configuration.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPglite } from '../../services/shared/db/pglite.js';
import { adminClient } from '../helpers/admin-client.js';
import { sgtmEvent, serverEvent, sha256, webEvent } from '../helpers/factories.js';
import { REPO_ROOT, TEST_ADMIN_TOKEN, startServiceProcess, type ServiceProcess } from '../helpers/service-process.js';

let svc: ServiceProcess;
let key: string;
let workspaceId: string;

beforeAll(async () => {
  svc = await startServiceProcess({ env: { LOG_LEVEL: 'debug' } });
  const admin = adminClient(svc.url, TEST_ADMIN_TOKEN);
  workspaceId = (await admin.createWorkspace('acme', 'free')).id;
  key = (await admin.createKey(workspaceId, 'live')).key;
});
afterAll(async () => {
  if (svc.child.exitCode === null) await svc.kill();
});

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${svc.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });

describe('a new user on the embedded default', () => {
  const sent: string[] = [];

  it('sends the spec examples and gets 202 / {"status":"success"}', async () => {
    const a = [webEvent(), serverEvent({ event_name: 'sign_up' })];
    const resA = await post('/v1/events', a);
    expect(resA.status).toBe(202);
    expect(resA.headers.get('api-version')).toBe('2026-11-01');
    expect(await resA.json()).toMatchObject({ status: 'accepted', accepted: 2 });
    sent.push(...a.map((e) => e.event_metadata.idempotency_key));

    const resB = await post('/v1/sgtm', [sgtmEvent()], { 'idempotency-key': 'order-1001' });
    expect(resB.status).toBe(200);
    expect(await resB.json()).toEqual({ status: 'success' });
    sent.push('order-1001');
  });

  it('reads clear errors for bad requests', async () => {
    const bad = await post('/v1/events', [webEvent({ event_metadata: { identifiers: { email: { sha256_email: 'jane@example.com' } } } })]);
    expect(bad.status).toBe(400);
    expect(bad.headers.get('content-type')).toMatch(/application\/problem\+json/);
    const problem = await bad.json();
    expect(problem.detail).toContain('[0].event_metadata.identifiers.email.sha256_email');
    // The type URI resolves to a page describing the error.
    const page = await fetch(problem.type.replace('http://localhost:' + svc.env.PORT, svc.url));
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('SHA-256');

    const noKey = await fetch(`${svc.url}/v1/sgtm`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '[]' });
    expect(noKey.status).toBe(401);
    expect(await noKey.json()).toEqual({ error: 'Unauthorized', message: 'Invalid or missing API key.' });
  });

  it('never writes an API key or the admin token to its logs', async () => {
    await post('/v1/events', [webEvent()], { authorization: `Bearer ${key}x` }); // a refused key is logged too
    const out = svc.output();
    expect(out.length).toBeGreaterThan(0);
    expect(out).not.toContain(key);
    expect(out).not.toContain(key.slice(9));
    expect(out).not.toContain(TEST_ADMIN_TOKEN);
  });

  it('serves the OpenAPI document and Prometheus metrics', async () => {
    const doc = await (await fetch(`${svc.url}/openapi.json`)).json();
    expect(doc.info.version).toBe('1.0.0');
    const metrics = await (await fetch(svc.metricsUrl)).text();
    expect(metrics).toMatch(/events_ingested_total\{endpoint="events",outcome="accepted",reason=""\} 2/);
    expect(metrics).toMatch(/events_ingested_total\{endpoint="events",outcome="rejected",reason="unhashed-personal-data"\} 1/);
    expect(metrics).toMatch(/http_request_duration_seconds_bucket\{le="0.05",route="\/v1\/events",method="POST"\}/);
  });

  it('finishes in-flight requests on SIGTERM, exits 0, and the accepted events are in the raw log', async () => {
    const inflight = Array.from({ length: 20 }, () => webEvent());
    const requests = inflight.map((e) => post('/v1/events', [e]).then((r) => r.status).catch(() => 0));
    // The first answer: the service is taking the batch, the rest are on their way or in progress.
    await Promise.race(requests);
    const code = svc.stop();
    const statuses = await Promise.all(requests);
    expect(await code).toBe(0);
    // Every request is either accepted (and then durable) or refused outright; none is left hanging.
    for (const [i, s] of statuses.entries()) if (s === 202) sent.push(inflight[i]!.event_metadata.idempotency_key);
    expect(statuses.every((s) => s === 202 || s === 503 || s === 0)).toBe(true);

    const db = await openPglite(join(svc.dataDir, 'db'));
    try {
      const rows = await db.query<{ key: string; value: { idempotency_key: string; dedupe: { key: string } | null } }>(
        "SELECT key, value FROM log_records WHERE topic = 'events.raw'",
      );
      const keys = new Set(rows.rows.map((r) => r.value.dedupe?.key));
      for (const k of sent) expect(keys, k).toContain(k);
      expect(rows.rows.every((r) => r.key.startsWith(`${workspaceId}:`))).toBe(true);
      // No raw personal data anywhere in the log.
      expect(JSON.stringify(rows.rows)).not.toContain('jane@example.com');
      expect(JSON.stringify(rows.rows)).toContain(sha256('jane@example.com'));
    } finally {
      await db.close();
    }
  });
});

describe('configuration errors', () => {
  const start = (env: Record<string, string>) =>
    spawnSync(process.execPath, [join(REPO_ROOT, 'dist', 'services', 'compose', 'main.js')], {
      env: { PATH: process.env.PATH, DATA_DIR: mkdtempSync(join(tmpdir(), 'cfg-')), LOG_LEVEL: 'silent', ...env },
      encoding: 'utf8',
      timeout: 30_000,
    });
  const expectOneLine = (r: ReturnType<typeof start>, variable: string) => {
    expect(r.status, r.stderr).toBe(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines, r.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^invalid configuration: ${variable} `));
  };

  it.each([
    ['PORT', { PORT: 'eighty' }],
    ['SERVICE_ROLE', { SERVICE_ROLE: 'everything' }],
    ['CREDENTIALS_KEY', { CREDENTIALS_KEY: 'c2hvcnQ=' }],
    ['PLAN_LIMITS', { PLAN_LIMITS: '{}' }],
    ['CREDENTIALS_KEY', { CREDENTIALS_KEY: `junk${Buffer.alloc(32, 3).toString('base64')}` }],
    ['PUBLIC_BASE_URL', { PUBLIC_BASE_URL: 'javascript:alert(1)' }],
    ['HOST', { HOST: 'not a host' }],
  ])('a bad %s fails the start with one line naming it, exit code 1', (variable, env) => {
    expectOneLine(start(env), variable);
  });

  it('a PORT in use: one line, exit code 1', async () => {
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', () => r()));
    const port = (taken.address() as AddressInfo).port;
    try {
      const r = start({ PORT: String(port), HOST: '127.0.0.1', METRICS_PORT: '0' });
      expectOneLine(r, 'PORT');
      expect(r.stderr).toContain('already in use');
    } finally {
      taken.close();
    }
  });

  it('a HOST that is not this machine: one line, exit code 1', () => {
    const r = start({ HOST: '192.0.2.1', PORT: '0', METRICS_PORT: '0' });
    expect(r.status, r.stderr).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^invalid configuration: HOST 192\.0\.2\.1 /);
  });
});
