/**
 * The graph sink analyses the graph tables itself, so that a merge's relabel finds its rows through
 * identity_nodes_cluster even where autovacuum has not analysed them yet (a new database) or never will (PGlite).
 * On real Postgres (autovacuum off for the test's tables, so only the sink analyses them) and on PGlite.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANALYZE_MIN_ROWS, GraphTableStatistics, createGraphSinkStage } from '../../services/enrich/identity/graph-sink.js';
import type { GraphChanges } from '../../services/enrich/identity/graph-state.js';
import type { NodeRow } from '../../services/enrich/identity/graph-repo.js';
import type { Db } from '../../services/shared/db/db.js';
import { Topics } from '../../services/shared/topics.js';
import { NoStore } from '../../services/stream/store.js';
import { openDatabase } from '../../services/shared/db/open.js';
import { freshDatabase, infraEnv } from '../helpers/infra.js';

const WS = 'ws_sink_stats';
let db: Db;

const runtimes: ReadonlyArray<readonly [string, () => Promise<{ db: Db; close(): Promise<void> }>]> = [
  [
    'Postgres',
    async () => {
      const database = await freshDatabase(infraEnv().DATABASE_URL);
      await database.db.query('ALTER TABLE identity_nodes SET (autovacuum_enabled = false)');
      await database.db.query('ALTER TABLE identity_edges SET (autovacuum_enabled = false)');
      return { db: database.db, close: () => database.drop() };
    },
  ],
  [
    'PGlite',
    async () => {
      const pglite = await openDatabase({ inMemory: true });
      return { db: pglite, close: () => pglite.close() };
    },
  ],
];

const reltuples = async (): Promise<number> =>
  (await db.query<{ n: number }>(`SELECT reltuples::float8 AS n FROM pg_class WHERE oid = 'identity_nodes'::regclass`)).rows[0]!.n;

/** Whether the planner would relabel 30 merged clusters by reading identity_nodes whole. */
async function mergeReadsTableWhole(): Promise<boolean> {
  const from = Array.from({ length: 30 }, (_, i) => `c${i * 7}`);
  const r = await db.query<{ 'QUERY PLAN': string }>(
    `EXPLAIN UPDATE identity_nodes AS n SET cluster_id = m.into_id FROM unnest($1::text[], $2::text[]) AS m(from_id, into_id) WHERE n.cluster_id = m.from_id`,
    [from, from.map((f) => `${f}-into`)],
  );
  return r.rows.some((row) => /Seq Scan on identity_nodes/.test(row['QUERY PLAN']));
}

const node = (i: number): NodeRow => ({
  node_id: `sink-${i}`,
  workspace_id: WS,
  key_mode: 'live',
  kind: 'client_id',
  value: `client-${i}`,
  cluster_id: `sink-c${i}`,
  first_seen_at: 1_764_000_000_000,
  last_seen_at: 1_764_000_000_000,
  page_location: null,
  user_agent: null,
  page_seen_at: null,
  ad_user_data_withdrawn_at: null,
  ad_storage_withdrawn_at: null,
});
const changesOf = (from: number, count: number): GraphChanges => ({
  workspace_id: WS,
  key_mode: 'live',
  merges: [],
  nodes: Array.from({ length: count }, (_, k) => node(from + k)),
  sightings: [],
  edges: [],
  withdrawals: [],
  erased_clusters: [],
  erased_node_ids: [],
});

describe.each(runtimes)('the graph sink keeps the graph tables analysed (%s)', (_name, open) => {
  let close: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    ({ db, close } = await open());
    // A graph grown faster than any analysis: 60,000 nodes, three to a cluster.
    await db.query(
      `INSERT INTO identity_nodes (node_id, workspace_id, key_mode, kind, value, cluster_id, first_seen_at, last_seen_at)
       SELECT md5('n' || i), $1, 'live', 'email_sha256', md5('v' || i), 'c' || (i / 3), now(), now() FROM generate_series(1, 60000) i`,
      [WS],
    );
  });
  afterAll(async () => {
    await close?.();
  });

  it('a batch that writes ANALYZE_MIN_ROWS rows analyses them: merges then find their rows by index', async () => {
    expect(await reltuples()).toBeLessThan(0); // never analysed
    expect(await mergeReadsTableWhole()).toBe(true);
    const stage = createGraphSinkStage();
    const batch = async (from: number, count: number) =>
      db.transaction((sql) =>
        stage.processBatch([{ topic: Topics.identityChanges, partition: 0, offset: String(from), key: `${WS}:live`, value: changesOf(from, count), timestamp: Date.now() }], {
          sql,
          store: new NoStore(),
          now: () => Date.now(),
          inTransaction: true,
          write: () => {
            throw new Error('the graph sink writes in its transaction itself');
          },
          emit: () => undefined,
        }),
      );
    await batch(0, ANALYZE_MIN_ROWS - 1);
    expect(await reltuples()).toBeLessThan(0);
    await batch(ANALYZE_MIN_ROWS, 1);
    expect(await reltuples()).toBe(60_000 + ANALYZE_MIN_ROWS);
    expect(await mergeReadsTableWhole()).toBe(false);
  });

  it('analyses again each time it has written as many rows as the table held at its last analysis', async () => {
    const statistics = new GraphTableStatistics();
    const wrote = (rows: number) => db.transaction((sql) => statistics.wrote(sql, rows));
    await wrote(ANALYZE_MIN_ROWS);
    const held = await reltuples();
    expect(statistics.analyses).toBe(1);
    await db.query(`INSERT INTO identity_nodes (node_id, workspace_id, key_mode, kind, value, cluster_id, first_seen_at, last_seen_at)
                    SELECT md5('m' || i), $1, 'live', 'email_sha256', md5('w' || i), 'd' || i, now(), now() FROM generate_series(1, 5000) i`, [WS]);
    await wrote(held - 1);
    expect(statistics.analyses).toBe(1);
    expect(await reltuples()).toBe(held);
    await wrote(1);
    expect(statistics.analyses).toBe(2);
    expect(await reltuples()).toBe(held + 5_000);
  });
});
