/**
 * Rate limits shared across gateway replicas through Redis (REDIS_URL): two app instances — two replicas — for
 * one workspace draw from one budget. Uses Debian's real redis-server (installed by `make test`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webEvent } from '../helpers/factories.js';
import { buildTestApp, type TestApp } from '../helpers/in-process.js';
import { inOneWindow } from '../helpers/rate-window.js';
import { freePort } from '../sandbox/ports.js';

let redis: ChildProcess;
let port: number;
let replicas: TestApp[] = [];

beforeAll(async () => {
  port = await freePort();
  redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  const { Redis } = await import('ioredis');
  const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => 50 });
  probe.on('error', () => undefined);
  for (let i = 0; i < 100; i++) {
    try {
      await probe.connect();
      break;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  expect(await probe.ping()).toBe('PONG');
  probe.disconnect();
});

afterAll(async () => {
  for (const r of replicas) await r.close();
  redis?.kill('SIGKILL');
});

describe('REDIS_URL: one budget across replicas', () => {
  it('two replicas together allow exactly rps + burst for one workspace', async () => {
    const env = { REDIS_URL: `redis://127.0.0.1:${port}`, PLAN_LIMITS: JSON.stringify({ tiny: { rps: 3, burst: 3 } }) };
    const a = await buildTestApp(env);
    replicas.push(a);
    const b = await buildTestApp(env);
    replicas.push(b);
    // A workspace both replicas know: created on a, copied into b's own key store.
    const workspaceOnBoth = async () => {
      const ws = await a.workspaceWithKey({ plan: 'tiny' });
      const rows = await a.db.query<Record<string, unknown>>('SELECT * FROM api_keys WHERE workspace_id = $1', [ws.workspaceId]);
      await b.db.query("INSERT INTO workspaces (id, name, plan) VALUES ($1, 'acme', 'tiny')", [ws.workspaceId]);
      for (const k of rows.rows) {
        await b.db.query('INSERT INTO api_keys (id, workspace_id, key_hash, display_start, mode) VALUES ($1, $2, $3, $4, $5)', [
          k.id, k.workspace_id, k.key_hash, k.display_start, k.mode,
        ]);
      }
      return ws;
    };
    const send = (t: TestApp, key: string) =>
      t.app.inject({
        method: 'POST',
        url: '/v1/events',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        payload: JSON.stringify([webEvent()]),
      });
    // Exact counts hold inside one limiter window; a burst a loaded machine stretched past 1 s is run again.
    const statuses = await inOneWindow(workspaceOnBoth, async (ws) => {
      const statuses: number[] = [];
      for (let i = 0; i < 8; i++) statuses.push((await send(i % 2 ? b : a, ws.key)).statusCode);
      return statuses;
    });
    // In-process limits would have allowed 6 per replica (12, all 8 here); shared, both together get 6.
    expect(statuses).toEqual([202, 202, 202, 202, 202, 202, 429, 429]);
  });

  it('keeps ingesting on per-process limits when Redis is unreachable', async () => {
    const deadPort = await freePort();
    const t = await buildTestApp({ REDIS_URL: `redis://127.0.0.1:${deadPort}`, PLAN_LIMITS: JSON.stringify({ tiny: { rps: 2, burst: 2 } }) });
    replicas.push(t);
    const statuses = await inOneWindow(
      () => t.workspaceWithKey({ plan: 'tiny' }),
      async (ws) => {
        const statuses: number[] = [];
        for (let i = 0; i < 6; i++) {
          const r = await t.app.inject({
            method: 'POST',
            url: '/v1/events',
            headers: { authorization: `Bearer ${ws.key}`, 'content-type': 'application/json' },
            payload: JSON.stringify([webEvent()]),
          });
          statuses.push(r.statusCode);
        }
        return statuses;
      },
    );
    // rps 2 + burst 2 from the in-process insurance limiter: ingestion goes on, and the limit still holds.
    expect(statuses).toEqual([202, 202, 202, 202, 429, 429]);
  });
});
