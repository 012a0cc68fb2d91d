/**
 * kill -9 of the running service (node dist/services/compose/main.js) while it forwards: after a restart on the same data
 * directory every conversion reaches the platform, no conversion recorded in the sent ledger is sent again, and
 * the only resends are of the batch that was on the wire at the kill (same event_ids, which the platform dedups).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversion, eventually, receivedBySandbox, sandboxControl, sandboxPlatformEnv } from '../helpers/forwarder-rig.js';
import { startSandbox, type RunningSandbox } from '../sandbox/server.js';
import { conversionKey } from '../../services/domain/conversion.js';
import { openPglite } from '../../services/shared/db/pglite.js';
import { EmbeddedLog } from '../../services/stream/embedded/log.js';
import { Topics } from '../../services/shared/topics.js';
import { adminClient } from '../helpers/admin-client.js';
import { newBrowser } from '../helpers/browser.js';
import { REPO_ROOT, TEST_ADMIN_TOKEN, startServiceProcess, type ServiceProcess } from '../helpers/service-process.js';

const TOTAL = 400;
const BATCH = 50;

let sandbox: RunningSandbox;
const running: ServiceProcess[] = [];

beforeAll(async () => {
  if (!existsSync(join(REPO_ROOT, 'dist', 'services', 'compose', 'main.js'))) throw new Error('build first: npx tsc -p tsconfig.dev.json (make test does)');
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
      CREDENTIALS_KEY: Buffer.alloc(32, 7).toString('base64'),
      ...sandboxPlatformEnv(sandbox),
      FORWARDER_BATCH_SIZE: String(BATCH),
      FORWARDER_LINGER_MS: '20',
      FORWARDER_REQUEST_TIMEOUT_MS: '1000',
    },
  });
  running.push(p);
  return p;
}

/** Reads the stopped service's store (PGlite is single-process). */
async function withStore<T>(dataDir: string, fn: (db: Awaited<ReturnType<typeof openPglite>>) => Promise<T>): Promise<T> {
  const db = await openPglite(join(dataDir, 'db'));
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

describe('forwarder: kill -9 mid-batch', () => {
  it('loses nothing and never resends a recorded event_id', { timeout: 180_000 }, async () => {
    // 1. Connect a workspace through the real service, then stop it.
    const first = await start();
    const admin = adminClient(first.url, TEST_ADMIN_TOKEN);
    const ws = (await admin.createWorkspace('crash')).id;
    const started = await admin.call('POST', `/admin/v1/workspaces/${ws}/connection`);
    const page = await newBrowser().open(started.body.authorize_url);
    expect(page.status).toBe(200);
    expect(await first.stop()).toBe(0);
    const dataDir = first.dataDir;

    // 2. Conversions waiting on conversions.ready.
    const cs = Array.from({ length: TOTAL }, () => conversion(ws));
    const ids = cs.map((c) => c.event_id);
    await withStore(dataDir, async (db) => {
      const log = new EmbeddedLog(db);
      await log.append(Topics.conversionsReady, cs.map((c) => ({ key: conversionKey(c), value: c })), Date.now() + 30_000);
      await log.close();
    });

    // 3. A slow platform keeps a batch on the wire most of the time; kill -9 while one is.
    await sandboxControl(sandbox, '/faults', { events: [{ delay_ms: 300, times: 10_000 }] });
    const second = await start(dataDir);
    await eventually('two batches delivered', async () => {
      const n = (await receivedBySandbox(sandbox)).length;
      return n >= 2 * BATCH ? n : false;
    }, 30_000);
    // A batch is on the wire when the platform holds a whole request in its delay, not answered yet: kill then.
    const delayedEvents = async () => (await sandboxControl(sandbox, '/delayed')).delayed.events ?? 0;
    await eventually('a batch is on the wire', async () => (await delayedEvents()) > 0, 10_000);
    await second.kill();
    // Proof that the kill landed mid-batch: the request it sent is still held by the platform (300 ms), unanswered.
    expect(await delayedEvents()).toBeGreaterThan(0);
    const receivedAtKill = (await receivedBySandbox(sandbox)).length;
    const ledgered = await withStore(dataDir, async (db) =>
      (await db.query<{ event_id: string }>('SELECT event_id FROM forward_sent WHERE workspace_id = $1', [ws])).rows.map((r) => r.event_id),
    );
    expect(ledgered.length).toBeGreaterThanOrEqual(2 * BATCH);
    expect(ledgered.length).toBeLessThan(TOTAL);

    // 4. Restart on the same data: everything arrives.
    await fetch(`${sandbox.controlUrl}/faults`, { method: 'DELETE' });
    const third = await start(dataDir);
    await eventually('all conversions delivered', async () => {
      const got = new Set((await receivedBySandbox(sandbox)).map((e) => e.event_id));
      return ids.every((id) => got.has(id));
    }, 60_000);
    // Wait for the ledger to catch up with what the platform acknowledged, instead of a fixed pause.
    await eventually('the outbox drained', async () => {
      const r = await fetch(third.metricsUrl);
      return /^forwarder_outbox_records\{state="pending"\} 0$/m.test(await r.text());
    }, 30_000);
    expect(await third.stop()).toBe(0);

    const received = await receivedBySandbox(sandbox);
    const afterKill = received.slice(receivedAtKill).map((e) => e.event_id);
    const recorded = new Set(ledgered);
    // No conversion recorded as sent was sent again.
    expect(afterKill.filter((id) => recorded.has(id))).toEqual([]);
    // The only repeats are the batch that was on the wire at the kill, with the same event_ids.
    const counts = new Map<string, number>();
    for (const e of received) counts.set(e.event_id, (counts.get(e.event_id) ?? 0) + 1);
    const repeated = [...counts.entries()].filter(([, n]) => n > 1);
    // The batch on the wire at the kill reached the platform (it held the whole request) but not the ledger: it is
    // sent again after the restart, with the same event_ids. Nothing else is.
    expect(repeated.length).toBeGreaterThan(0);
    expect(repeated.length).toBeLessThanOrEqual(BATCH);
    expect(repeated.every(([, n]) => n === 2)).toBe(true);
    // ... and only conversions the ledger had not recorded at the kill (the batch that was on the wire).
    expect(repeated.every(([id]) => !recorded.has(id))).toBe(true);
    expect(new Set(received.map((e) => e.event_id))).toEqual(new Set(ids));
    const final = await withStore(dataDir, async (db) => ({
      sent: (await db.query<{ n: unknown }>('SELECT count(*) AS n FROM forward_sent WHERE workspace_id = $1', [ws])).rows[0]!.n,
      outbox: (await db.query<{ n: unknown }>('SELECT count(*) AS n FROM forward_outbox WHERE workspace_id = $1', [ws])).rows[0]!.n,
    }));
    expect(Number(final.sent)).toBe(TOTAL);
    expect(Number(final.outbox)).toBe(0);
  });
});
