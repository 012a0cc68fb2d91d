/**
 * A node seen again with nothing else new reaches the graph sink as a sighting (its id and when), not as its whole
 * row: the sink moves identity_nodes.last_seen_at forward and never back, folds sightings into the rows the same run
 * writes, creates no row for a node it has none of, and still takes records written before sightings existed.
 * On real Postgres and on PGlite.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { applyChanges } from '../../services/enrich/identity/graph-sink.js';
import type { GraphChanges, NodeSighting } from '../../services/enrich/identity/graph-state.js';
import type { NodeRow } from '../../services/enrich/identity/graph-repo.js';
import type { Db } from '../../services/shared/db/db.js';
import { openDatabase } from '../../services/shared/db/open.js';
import { freshDatabase, infraEnv } from '../helpers/infra.js';

const WS = 'ws_sink_sightings';
const T0 = 1_764_000_000_000;
const MIN = 60_000;

const runtimes: ReadonlyArray<readonly [string, () => Promise<{ db: Db; close(): Promise<void> }>]> = [
  [
    'Postgres',
    async () => {
      const database = await freshDatabase(infraEnv().DATABASE_URL);
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

const row = (id: string, at: number): NodeRow => ({
  node_id: id,
  workspace_id: WS,
  key_mode: 'live',
  kind: 'email_sha256',
  value: `value-${id}`,
  cluster_id: 'c_sightings',
  first_seen_at: at,
  last_seen_at: at,
  page_location: 'https://shop.example/',
  user_agent: 'agent',
  page_seen_at: at,
  ad_user_data_withdrawn_at: null,
  ad_storage_withdrawn_at: null,
});

const changes = (nodes: NodeRow[], sightings: NodeSighting[]): GraphChanges => ({
  workspace_id: WS,
  key_mode: 'live',
  merges: [],
  nodes,
  sightings,
  edges: [],
  withdrawals: [],
  erased_clusters: [],
  erased_node_ids: [],
});

describe.each(runtimes)('the graph sink applies sightings (%s)', (_name, open) => {
  let db: Db;
  let close: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    ({ db, close } = await open());
  });
  afterAll(async () => {
    await close?.();
  });
  beforeEach(async () => {
    await db.query('DELETE FROM identity_nodes WHERE workspace_id = $1', [WS]);
  });

  const apply = (...records: GraphChanges[]) => db.transaction((sql) => applyChanges(sql, records));
  const nodes = async () =>
    (
      await db.query<{ node_id: string; last_seen: number; first_seen: number; page_location: string | null }>(
        `SELECT node_id, (extract(epoch FROM last_seen_at) * 1000)::float8 AS last_seen, (extract(epoch FROM first_seen_at) * 1000)::float8 AS first_seen, page_location
         FROM identity_nodes WHERE workspace_id = $1 ORDER BY node_id`,
        [WS],
      )
    ).rows.map((r) => ({ ...r, last_seen: Number(r.last_seen), first_seen: Number(r.first_seen) }));

  it('moves last_seen_at forward, never back, and leaves the rest of the row', async () => {
    await apply(changes([row('a', T0)], []));
    await apply(changes([], [{ node_id: 'a', last_seen_at: T0 + 10 * MIN }]));
    expect(await nodes()).toEqual([{ node_id: 'a', first_seen: T0, last_seen: T0 + 10 * MIN, page_location: 'https://shop.example/' }]);
    // A late event's sighting (5 minutes in) does not move it back.
    await apply(changes([], [{ node_id: 'a', last_seen_at: T0 + 5 * MIN }]));
    expect((await nodes())[0]!.last_seen).toBe(T0 + 10 * MIN);
  });

  it('folds a sighting into the row the same run writes, before or after it', async () => {
    await apply(
      changes([], [{ node_id: 'b', last_seen_at: T0 + 7 * MIN }]),
      changes([row('b', T0 + 2 * MIN), row('c', T0)], [{ node_id: 'c', last_seen_at: T0 + 3 * MIN }]),
      changes([], [{ node_id: 'c', last_seen_at: T0 + 4 * MIN }, { node_id: 'c', last_seen_at: T0 + MIN }]),
    );
    expect((await nodes()).map((n) => [n.node_id, n.last_seen])).toEqual([
      ['b', T0 + 7 * MIN],
      ['c', T0 + 4 * MIN],
    ]);
  });

  it('creates no row for a node it has none of (erased, or swept by retention)', async () => {
    await apply(changes([], [{ node_id: 'gone', last_seen_at: T0 }]));
    expect(await nodes()).toEqual([]);
  });

  it('takes a record written before sightings existed', async () => {
    const { sightings: _none, ...older } = changes([row('d', T0)], []);
    await apply(older as GraphChanges);
    expect((await nodes()).map((n) => n.node_id)).toEqual(['d']);
  });
});
