/** Key last-used times and event-name counts: gathered in memory, written in batches (usage.ts). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../shared/db/db.js';
import { openDatabase } from '../../shared/db/open.js';
import { EVENT_NAME_MAX_AGE_DAYS, LAST_USED_EVERY_MS, MAX_EVENT_NAMES_PER_WORKSPACE, UsageRecorder } from './usage.js';

let db: Db;
beforeAll(async () => {
  db = await openDatabase({ inMemory: true });
  await db.query(`INSERT INTO workspaces (id, name, plan) VALUES ('ws_u', 'usage', 'free')`);
  await db.query(`INSERT INTO api_keys (id, workspace_id, key_hash, display_start, mode) VALUES ('key_u', 'ws_u', 'h', 'evk_live_x', 'live')`);
});
afterAll(async () => db?.close());

const lastUsed = async () =>
  (await db.query<{ last_used_at: unknown }>(`SELECT last_used_at FROM api_keys WHERE id = 'key_u'`)).rows[0]!.last_used_at;
const names = async () =>
  (await db.query<{ name: string; count: unknown }>(`SELECT name, count FROM workspace_event_names WHERE workspace_id = 'ws_u' ORDER BY name`)).rows.map(
    (r) => [r.name, Number(r.count)],
  );

describe('UsageRecorder', () => {
  it('writes a key\'s last use at most once a minute', async () => {
    const usage = new UsageRecorder(db);
    const t0 = Date.parse('2026-01-01T10:00:00Z');
    usage.keyUsed('key_u', t0);
    await usage.flush();
    expect(new Date(await lastUsed() as string).getTime()).toBe(t0);
    usage.keyUsed('key_u', t0 + LAST_USED_EVERY_MS - 1);
    await usage.flush();
    expect(new Date(await lastUsed() as string).getTime()).toBe(t0);
    usage.keyUsed('key_u', t0 + LAST_USED_EVERY_MS);
    await usage.close();
    expect(new Date(await lastUsed() as string).getTime()).toBe(t0 + LAST_USED_EVERY_MS);
  });

  it('adds up event names across requests and flushes', async () => {
    const usage = new UsageRecorder(db);
    usage.eventsSent('ws_u', ['purchase', 'purchase', 'sign_up']);
    usage.eventsSent('ws_u', ['purchase']);
    await usage.flush();
    usage.eventsSent('ws_u', ['sign_up']);
    await usage.close();
    expect(await names()).toEqual([['purchase', 3], ['sign_up', 2]]);
  });

  it('keeps at most MAX_EVENT_NAMES_PER_WORKSPACE names a workspace, the most sent; a flood of one-off names cannot push them out', async () => {
    const usage = new UsageRecorder(db);
    const count = async () => Number((await db.query<{ n: unknown }>(`SELECT count(*) AS n FROM workspace_event_names WHERE workspace_id = 'ws_flood'`)).rows[0]!.n);
    usage.eventsSent('ws_flood', ['purchase', 'purchase', 'sign_up', 'sign_up']);
    await usage.flush();
    for (let round = 0; round < 3; round++) {
      usage.eventsSent('ws_flood', Array.from({ length: 2 * MAX_EVENT_NAMES_PER_WORKSPACE }, (_, i) => `junk_${round}_${i}`));
      await usage.flush();
      expect(await count()).toBe(MAX_EVENT_NAMES_PER_WORKSPACE);
    }
    const kept = await db.query<{ name: string }>(`SELECT name FROM workspace_event_names WHERE workspace_id = 'ws_flood' AND name IN ('purchase', 'sign_up') ORDER BY name`);
    expect(kept.rows.map((r) => r.name)).toEqual(['purchase', 'sign_up']);
    // The newest one-off names are the ones kept beside them.
    const newest = await db.query(`SELECT 1 FROM workspace_event_names WHERE workspace_id = 'ws_flood' AND name = 'junk_2_0'`);
    expect(newest.rows).toHaveLength(1);
    await usage.close();
  });

  it(`forgets a name not sent for ${EVENT_NAME_MAX_AGE_DAYS} days, at the workspace's next write`, async () => {
    const usage = new UsageRecorder(db);
    const day = 86_400_000;
    usage.eventsSent('ws_age', ['old_name'], Date.now() - (EVENT_NAME_MAX_AGE_DAYS + 1) * day);
    usage.eventsSent('ws_age', ['recent_name'], Date.now() - (EVENT_NAME_MAX_AGE_DAYS - 1) * day);
    await usage.flush();
    usage.eventsSent('ws_age', ['today']);
    await usage.close();
    const rows = await db.query<{ name: string }>(`SELECT name FROM workspace_event_names WHERE workspace_id = 'ws_age' ORDER BY name`);
    expect(rows.rows.map((r) => r.name)).toEqual(['recent_name', 'today']);
  });

  describe('bad input', () => {
    it('skips empty and over-long names, and a failing write reaches onError without throwing', async () => {
      const errors: unknown[] = [];
      const usage = new UsageRecorder(db, (err) => errors.push(err));
      usage.eventsSent('ws_u', ['', 'x'.repeat(257)]);
      await usage.flush();
      expect((await names()).map(([n]) => n)).toEqual(['purchase', 'sign_up']);
      const broken = new UsageRecorder({ query: async () => { throw new Error('db down'); } }, (err) => errors.push(err));
      broken.eventsSent('ws_u', ['lead']);
      await broken.close();
      expect(errors.map((e) => (e as Error).message)).toEqual(['db down']);
    });
  });
});
