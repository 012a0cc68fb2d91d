/**
 * kill -9 of the running service (node dist/services/compose/main.js, embedded default) in the middle of a replay:
 * after a restart on the same data directory the job resumes from its saved cursor and finishes; every replayed
 * purchase reaches the platform, and the only resends are of the one batch that was on the wire at the kill. Then a
 * running replay is cancelled and stops moving.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminClient, type AdminClient } from '../helpers/admin-client.js';
import { newBrowser } from '../helpers/browser.js';
import { webEvent } from '../helpers/factories.js';
import { eventually, receivedBySandbox, sandboxPlatformEnv } from '../helpers/forwarder-rig.js';
import { REPO_ROOT, TEST_ADMIN_TOKEN, startServiceProcess, type ServiceProcess } from '../helpers/service-process.js';
import { SETUP } from '../helpers/workspaces.js';
import { startSandbox, type RunningSandbox } from '../sandbox/server.js';

const TOTAL = 100;
const SENDER_BATCH = 5;

let sandbox: RunningSandbox;
const running: ServiceProcess[] = [];

beforeAll(async () => {
  if (!existsSync(join(REPO_ROOT, 'dist', 'services', 'compose', 'main.js'))) throw new Error('build first: make build-dev (make test does)');
  sandbox = await startSandbox({ port: 0 });
});
afterAll(async () => {
  for (const p of running) if (p.child.exitCode === null) await p.kill();
  await sandbox?.close();
});

async function start(dataDir?: string): Promise<ServiceProcess> {
  const p = await startServiceProcess({
    dataDir,
    env: {
      CREDENTIALS_KEY: Buffer.alloc(32, 9).toString('base64'),
      ...sandboxPlatformEnv(sandbox),
      FORWARDER_BATCH_SIZE: String(SENDER_BATCH),
      FORWARDER_LINGER_MS: '20',
      // 25 events/s: chunks of 5, one every 200 ms; the whole replay takes about 4 s.
      REPLAY_MAX_EVENTS_PER_SECOND: '25',
    },
  });
  running.push(p);
  return p;
}

const job = async (admin: AdminClient, ws: string, id: string): Promise<any> => (await admin.call('GET', `/admin/v1/workspaces/${ws}/replays/${id}`)).body;

describe('replay: kill -9 mid-replay', () => {
  it('resumes from its cursor after a restart and delivers each purchase once', { timeout: 180_000 }, async () => {
    const first = await start();
    let admin = adminClient(first.url, TEST_ADMIN_TOKEN);
    const ws = (await admin.createWorkspace('replay-crash')).id;
    const key = (await admin.createKey(ws, 'live')).key;
    const from = new Date(Date.now() - 60_000).toISOString();
    const purchases = Array.from({ length: TOTAL }, () => webEvent());
    const ids = new Set(purchases.map((p) => p.event_metadata.idempotency_key));
    for (let i = 0; i < TOTAL; i += 50) {
      const r = await fetch(`${first.url}/v1/events`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify(purchases.slice(i, i + 50)),
      });
      expect(r.status).toBe(202);
    }
    await eventually('the pipeline drained', async () => {
      const r = await admin.call('GET', '/admin/v1/pipeline');
      return (r.body.consumers as Array<{ lag: number }>).every((c) => c.lag === 0);
    }, 30_000);
    // Forwarding set up only now: the live pipeline dropped the purchases (no_forwarding_setup).
    expect((await admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, { ...SETUP, test_event_code: null })).status).toBe(200);
    const connect = await admin.call('POST', `/admin/v1/workspaces/${ws}/connection`);
    expect((await newBrowser().open(connect.body.authorize_url)).status).toBe(200);
    const to = new Date(Date.now() + 60_000).toISOString();

    const started = await admin.call('POST', `/admin/v1/workspaces/${ws}/replays`, { from, to });
    expect(started.status).toBe(202);
    const id = started.body.id as string;
    const before = await eventually('the replay under way', async () => {
      const j = await job(admin, ws, id);
      return j.events_read >= 30 ? j : undefined;
    }, 30_000);
    expect(before.status).toBe('running');
    await first.kill();
    const readAtKill = before.events_read as number;
    expect(readAtKill).toBeLessThan(TOTAL);

    const second = await start(first.dataDir);
    admin = adminClient(second.url, TEST_ADMIN_TOKEN);
    // The dead process's lease runs out (15 s), then the new one resumes the job from its cursor.
    const done = await eventually('the resumed replay finished', async () => {
      const j = await job(admin, ws, id);
      return j.status === 'done' ? j : undefined;
    }, 60_000);
    expect(done).toMatchObject({ events_read: TOTAL, conversions_built: TOTAL, conversions_sent: TOTAL, skipped_already_sent: 0, progress: 1 });

    const received = await eventually('every purchase at the platform', async () => {
      const r = (await receivedBySandbox(sandbox)).map((e) => e.event_id).filter((e) => ids.has(e));
      return new Set(r).size === TOTAL ? r : undefined;
    }, 30_000);
    // Nothing more can go once each purchase is recorded sent: a conversion leaves the outbox in the transaction that
    // records it, so the count below is final (no sleep that a slow machine outlasts).
    await eventually('every purchase recorded sent', async () => {
      for (const id of ids) {
        const r = await admin.call('GET', `/admin/v1/workspaces/${ws}/conversions/${encodeURIComponent(id)}`);
        if (r.body?.delivery?.status !== 'sent') return false;
      }
      return true;
    }, 30_000);
    const all = (await receivedBySandbox(sandbox)).map((e) => e.event_id).filter((e) => ids.has(e));
    expect(new Set(all).size).toBe(TOTAL);
    // At most the batch on the wire at the kill went twice (same event_ids: the platform dedups them).
    expect(all.length - TOTAL).toBeLessThanOrEqual(SENDER_BATCH);
    expect(received.length).toBeGreaterThanOrEqual(TOTAL);

    // A resend replay of the same range, cancelled while it runs, stops moving.
    const again = await admin.call('POST', `/admin/v1/workspaces/${ws}/replays`, { from, to, resend: true });
    expect(again.status).toBe(202);
    await eventually('the second replay under way', async () => (await job(admin, ws, again.body.id)).events_read > 0, 30_000);
    expect((await admin.call('DELETE', `/admin/v1/workspaces/${ws}/replays/${again.body.id}`)).status).toBe(204);
    const cancelled = await job(admin, ws, again.body.id);
    expect(cancelled.status).toBe('cancelled');
    // The worker has let the job go (this process runs no replay): from here on nothing could move it.
    await eventually('the worker let the cancelled job go', async () => /^replays_running 0$/m.test(await (await fetch(second.metricsUrl)).text()), 30_000);
    const later = await job(admin, ws, again.body.id);
    expect(later.status).toBe('cancelled');
    expect(later.events_read).toBe(cancelled.events_read);
    expect(later.events_read).toBeLessThan(TOTAL);
    expect((await admin.call('DELETE', `/admin/v1/workspaces/${ws}/replays/${again.body.id}`)).status).toBe(204);

    expect(await second.stop()).toBe(0);
  });
});
