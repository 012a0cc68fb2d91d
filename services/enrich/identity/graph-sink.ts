/**
 * The graph sink: a stage that writes what enrich's batches changed in the identity graph (identity.graph-changes)
 * to the queryable tables identity_nodes and identity_edges, off enrich's hot path and in bulk: per batch of change
 * records, one relabel statement for the merges, one upsert of the nodes, one update of the sightings (nodes seen
 * again with nothing else new: last_seen_at alone), one update for consent withdrawals and one upsert of the edges.
 * Erasures cut the batch, so rows written after an erasure are never deleted by it.
 * Every write describes the graph as it is after the change, so a batch applied twice leaves the same rows.
 * How far the tables trail the graph: identity_graph_sink_delay_seconds, and the stage's consumer lag.
 */
import type { Sql } from '../../shared/db/db.js';
import { Topics } from '../../shared/topics.js';
import { dlq, ok, type Outcome, type Stage } from '../../stream/contract.js';
import { graphSinkDelay } from '../metrics.js';
import { deleteEdges } from './erase.js';
import { updateLastSeen, upsertEdges, upsertNodes, type EdgeRow, type NodeRow } from './graph-repo.js';
import type { GraphKind } from './kinds.js';
import type { GraphChanges } from './graph-state.js';

export const GRAPH_SINK_STAGE = 'identity-sink';

const isChanges = (v: unknown): v is GraphChanges => {
  const c = v as GraphChanges;
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof c.workspace_id === 'string' &&
    (c.key_mode === 'live' || c.key_mode === 'test') &&
    [c.merges, c.nodes, c.edges, c.withdrawals, c.erased_clusters, c.erased_node_ids].every(Array.isArray) &&
    // Records written before sightings existed have none.
    (c.sightings === undefined || Array.isArray(c.sightings))
  );
};

/** The fewest rows the sink writes before it analyses the graph tables (a table's first statistics). */
export const ANALYZE_MIN_ROWS = 1_000;

/**
 * The sink keeps the graph tables' planner statistics current itself. A merge's relabel and a withdrawal join
 * identity_nodes by cluster id: with statistics the planner finds the rows through identity_nodes_cluster, without
 * them it reads the whole table for each (Postgres 15, 500,000 nodes: 100 ms against 0.9). Tables have none until
 * analysed: in a new database until autovacuum comes (a minute or more, and the graph grows by thousands of rows a
 * second then), and on PGlite, the embedded default, ever (it has no autovacuum). So the sink analyses both tables
 * each time it has written as many rows as identity_nodes held at its last analysis (at least ANALYZE_MIN_ROWS): once
 * each time the graph doubles, each a fixed sample. docs/decisions.md has the measurements.
 */
export class GraphTableStatistics {
  private written = 0;
  private threshold = ANALYZE_MIN_ROWS;
  analyses = 0;

  /** Counts rows written in the batch's transaction, and analyses there when they reach the threshold. */
  async wrote(sql: Sql, rows: number): Promise<void> {
    this.written += rows;
    if (this.written < this.threshold) return;
    // A sample of 3,000 rows rather than the default 30,000: 21 ms rather than 250 at 500,000 nodes, and what the
    // joins need of it, that a cluster id matches few rows, it tells as well. Autovacuum's later analyses use the default.
    await sql.query('SET LOCAL default_statistics_target = 10');
    // SKIP_LOCKED: a table autovacuum is vacuuming or analysing is left to it; waiting would hold the sink's batch up
    // to the deadlock timeout (measured: up to 2 s in the drain, on a new database).
    await sql.query('ANALYZE (SKIP_LOCKED) identity_nodes, identity_edges');
    const r = await sql.query<{ rows: number }>(`SELECT reltuples::float8 AS rows FROM pg_class WHERE oid = 'identity_nodes'::regclass`);
    this.analyses++;
    this.written = 0;
    this.threshold = Math.max(ANALYZE_MIN_ROWS, Number(r.rows[0]?.rows ?? 0));
  }
}

export function createGraphSinkStage(): Stage<unknown> {
  const statistics = new GraphTableStatistics();
  return {
    name: GRAPH_SINK_STAGE,
    input: Topics.identityChanges,
    // A change record is one enrich chunk; a returning person is in many of them. Up to a second's records in one
    // batch write each node once (the latest row), not once per chunk.
    gather: { minBytes: 1024 * 1024, maxWaitMs: 1_000 },
    async processBatch(records, ctx) {
      const outcomes: Outcome[] = [];
      let run: GraphChanges[] = [];
      for (const r of records) {
        if (!isChanges(r.value)) {
          outcomes.push(dlq('invalid_graph_changes', 'not a GraphChanges record'));
          continue;
        }
        run.push(r.value);
        outcomes.push(ok());
        if (r.value.erased_clusters.length > 0 || r.value.erased_node_ids.length > 0) {
          await statistics.wrote(ctx.sql, await applyChanges(ctx.sql, run));
          run = [];
        }
      }
      await statistics.wrote(ctx.sql, await applyChanges(ctx.sql, run));
      const newest = records.at(-1);
      if (newest) graphSinkDelay.set(Math.max(0, ctx.now() - newest.timestamp) / 1000);
      return outcomes;
    },
  };
}

/**
 * Applies change records in order: only the last may hold erasures (createGraphSinkStage cuts the batch after them).
 * Answers how many node and edge rows it wrote.
 */
export async function applyChanges(sql: Sql, changes: readonly GraphChanges[]): Promise<number> {
  if (changes.length === 0) return 0;
  const into = new Map<string, string>();
  for (const c of changes) for (const m of c.merges) into.set(m.from, m.into);
  const root = (id: string): string => {
    let r = id;
    for (let hops = 0; hops < 64 && into.has(r); hops++) r = into.get(r)!;
    return r;
  };
  if (into.size > 0) {
    const from = [...into.keys()];
    await sql.query(
      `UPDATE identity_nodes AS n SET cluster_id = m.into_id FROM unnest($1::text[], $2::text[]) AS m(from_id, into_id) WHERE n.cluster_id = m.from_id`,
      [from, from.map(root)],
    );
  }

  const nodes = new Map<string, NodeRow>();
  const withdrawals = new Map<string, { storage: number | null; userData: number | null }>();
  const edges = new Map<string, EdgeRow>();
  const sightings = new Map<string, number>();
  for (const c of changes) {
    for (const n of c.nodes) nodes.set(n.node_id, { ...n, cluster_id: root(n.cluster_id), last_seen_at: Math.max(n.last_seen_at, sightings.get(n.node_id) ?? -Infinity) });
    for (const s of c.sightings ?? []) {
      const row = nodes.get(s.node_id);
      if (row) row.last_seen_at = Math.max(row.last_seen_at, s.last_seen_at);
      else sightings.set(s.node_id, Math.max(s.last_seen_at, sightings.get(s.node_id) ?? -Infinity));
    }
    for (const w of c.withdrawals) {
      const id = root(w.cluster_id);
      const prior = withdrawals.get(id);
      withdrawals.set(id, {
        storage: maxOf(prior?.storage ?? null, w.ad_storage_withdrawn_at),
        userData: maxOf(prior?.userData ?? null, w.ad_user_data_withdrawn_at),
      });
    }
    for (const e of c.edges) {
      const key = `${e.workspace_id}\n${e.key_mode}\n${e.a_kind}\n${e.a_value}\n${e.b_kind}\n${e.b_value}`;
      const prior = edges.get(key);
      edges.set(key, prior ? { ...e, first_seen_at: Math.min(prior.first_seen_at, e.first_seen_at), last_seen_at: Math.max(prior.last_seen_at, e.last_seen_at) } : e);
    }
  }
  await upsertNodes(sql, [...nodes.values()]);
  // A sighting of a node the run also writes whole went into its row (above).
  for (const id of nodes.keys()) sightings.delete(id);
  await updateLastSeen(sql, sightings);
  if (withdrawals.size > 0) {
    const ids = [...withdrawals.keys()];
    await sql.query(
      `UPDATE identity_nodes AS n SET
         ad_storage_withdrawn_at = GREATEST(n.ad_storage_withdrawn_at, to_timestamp(w.storage / 1000.0)),
         ad_user_data_withdrawn_at = GREATEST(n.ad_user_data_withdrawn_at, to_timestamp(w.user_data / 1000.0))
       FROM unnest($1::text[], $2::float8[], $3::float8[]) AS w(cluster_id, storage, user_data) WHERE n.cluster_id = w.cluster_id`,
      [ids, ids.map((i) => withdrawals.get(i)!.storage), ids.map((i) => withdrawals.get(i)!.userData)],
    );
  }
  await upsertEdges(sql, [...edges.values()]);

  const last = changes.at(-1)!;
  if (last.erased_clusters.length > 0 || last.erased_node_ids.length > 0) {
    // The erased clusters' nodes (those written since the erasure job deleted them too), then every edge touching one.
    // NOTE: two statements, not one with the deleted nodes as a CTE: the planner cannot tell how few rows such a CTE
    // returns, and joined all of identity_edges by a sequential scan (identity-edges-erasure.test.ts).
    const gone = await sql.query<{ kind: GraphKind; value: string }>(
      'DELETE FROM identity_nodes WHERE workspace_id = $1 AND (cluster_id = ANY($2::text[]) OR node_id = ANY($3::text[])) RETURNING kind, value',
      [last.workspace_id, last.erased_clusters.map(root), last.erased_node_ids],
    );
    await deleteEdges(sql, last.workspace_id, gone.rows);
  }
  return nodes.size + edges.size;
}

const maxOf = (a: number | null, b: number | null): number | null => (a === null ? b : b === null ? a : Math.max(a, b));
