/**
 * Retention of the privacy-relevant stores (docs/privacy.md): the sweep deletes exactly what outlived each store's
 * retention, keeps the rest, and measures the oldest entry of every store. Real PGlite, rows written as the stores
 * write them, with their times set in the past.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../shared/config.js';
import type { Db } from '../shared/db/db.js';
import { openDatabase } from '../shared/db/open.js';
import { registry } from '../shared/metrics.js';
import { Topics } from '../shared/topics.js';
import { measureOldest, sweepRetention } from './retention.js';

let db: Db;
beforeAll(async () => {
  db = await openDatabase({ inMemory: true });
});
afterAll(async () => db?.close());

const DAY = 24 * 3600_000;
const NOW = Date.now();
const ago = (days: number): string => new Date(NOW - days * DAY).toISOString();

async function seed(ws: string, days: { old: number; fresh: number }): Promise<void> {
  for (const [tag, d] of [['old', days.old], ['fresh', days.fresh]] as const) {
    await db.query(
      `INSERT INTO identity_nodes (node_id, workspace_id, key_mode, kind, value, cluster_id, first_seen_at, last_seen_at)
       VALUES ($1, $2, 'live', 'client_id', $3, $1, $4, $4)`,
      [`${ws}-${tag}`, ws, `cid-${tag}`, ago(d)],
    );
    await db.query(
      `INSERT INTO identity_edges (workspace_id, key_mode, a_kind, a_value, b_kind, b_value, first_seen_at, last_seen_at)
       VALUES ($1, 'live', 'client_id', $2, 'session_id', 's', $3, $3)`,
      [ws, `cid-${tag}`, ago(d)],
    );
    await db.query(`INSERT INTO log_records (topic, key, value, appended_at) VALUES ($1, $2, '{}', $3)`, [Topics.eventsDlq, `${ws}:${tag}`, ago(d)]);
    await db.query(`INSERT INTO audit_log (workspace_id, actor, action, at) VALUES ($1, 'admin', $2, $3)`, [ws, tag, ago(d)]);
    await db.query(
      `INSERT INTO conversion_explanations (workspace_id, key_mode, event_id, record, explanation, created_at) VALUES ($1, 'live', $2, '{}', '{}', $3)`,
      [ws, tag, ago(d)],
    );
    await db.query(
      `INSERT INTO erasures (id, workspace_id, status, subject, requested_at) VALUES ($1, $2, 'done', '{}', $3)`,
      [`era-${ws}-${tag}`, ws, ago(d)],
    );
    await db.query(`INSERT INTO erased_identifiers (workspace_id, id_hash, erased_at, erasure_id) VALUES ($1, $2, $3, $4)`, [ws, tag, ago(d), `era-${ws}-${tag}`]);
  }
}

const left = async (table: string, ws: string, col = 'workspace_id'): Promise<number> =>
  (await db.query(`SELECT 1 FROM ${table} WHERE ${col} = $1`, [ws])).rows.length;

describe('the retention sweep', () => {
  it('deletes what outlived each store retention (defaults) and keeps the rest', async () => {
    const cfg = loadConfig({}).privacy;
    // Past every default (graph 180 d, dead letters 30 d, audit 400 d, why-records 30 d), and well within them.
    await seed('ws_ret1', { old: 500, fresh: 1 });
    const deleted = await sweepRetention(db, cfg, NOW);
    expect(deleted).toMatchObject({ identity_graph: 1, identity_links: 1, dead_letters: 1, audit_log: 1, erasures: 1, why_records: 1 });
    for (const table of ['identity_nodes', 'identity_edges', 'audit_log', 'conversion_explanations', 'erasures', 'erased_identifiers']) {
      expect(await left(table, 'ws_ret1'), table).toBe(1);
    }
    expect((await db.query(`SELECT key FROM log_records WHERE topic = $1 AND key LIKE 'ws_ret1:%'`, [Topics.eventsDlq])).rows).toEqual([{ key: 'ws_ret1:fresh' }]);
  });

  it('follows the configured retentions', async () => {
    const cfg = loadConfig({ IDENTITY_GRAPH_RETENTION_DAYS: '10', DEAD_LETTER_RETENTION_DAYS: '2', AUDIT_LOG_RETENTION_DAYS: '10', CONVERSION_EXPLANATION_RETENTION_DAYS: '3' }).privacy;
    await seed('ws_ret2', { old: 12, fresh: 1 });
    const deleted = await sweepRetention(db, cfg, NOW);
    expect(deleted).toMatchObject({ identity_graph: 1, identity_links: 1, dead_letters: 1, audit_log: 1, erasures: 1, why_records: 1 });
    expect(await left('identity_nodes', 'ws_ret2')).toBe(1);
  });

  it('measures the oldest entry of every store as a metric', async () => {
    await db.query(
      `INSERT INTO forward_sent (workspace_id, event_id, sent_at) VALUES ('ws_ret3', 'e1', $1)`,
      [ago(2)],
    );
    const ages = await measureOldest(db, NOW);
    expect(ages.sent_ledger).toBeGreaterThanOrEqual(2 * 86_400 - 1);
    expect(ages.identity_graph).toBeGreaterThanOrEqual(86_400 - 1);
    expect(ages.outbox).toBe(0); // empty
    const metric = await registry.getSingleMetric('privacy_oldest_entry_age_seconds')!.get();
    const stores = metric.values.map((v) => v.labels.store);
    expect(new Set(stores)).toEqual(new Set(['identity_graph', 'identity_links', 'sent_ledger', 'outbox', 'deliveries', 'dead_letters', 'audit_log', 'erasures', 'why_records', 'raw_log']));
  });
});

describe('bad retention settings', () => {
  it.each([
    ['IDENTITY_GRAPH_RETENTION_DAYS', '0'],
    ['IDENTITY_GRAPH_RETENTION_DAYS', 'forever'],
    ['DEAD_LETTER_RETENTION_DAYS', '31'],
    ['AUDIT_LOG_RETENTION_DAYS', '-1'],
    ['CONVERSION_EXPLANATION_RETENTION_DAYS', '400'],
    ['RETENTION_SWEEP_INTERVAL_MS', '5'],
  ])('%s=%s fails the start naming the variable', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`invalid configuration: ${name}`));
  });
});
