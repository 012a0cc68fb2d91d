/**
 * Erasure from the identity graph (docs/privacy.md): the person's clusters, found from the identifiers of the
 * request in both key modes, are deleted whole (nodes), with every edge that touches one of their identifiers.
 * Organisation nodes are shared by many people by design: they are not the person's and stay (their edges to the
 * person go). These are the queryable tables; enrich's own state is erased by the erasure record the job routes to
 * the graph's partition (graph-state.ts erase), whose changes reach these tables again through the graph sink.
 */
import type { Sql } from '../../shared/db/db.js';
import type { KeyMode } from '../../domain/envelope.js';
import { nodeIdOf } from './graph-repo.js';
import { nodeKey, type GraphKind, type GraphNode } from './kinds.js';

const MODES: readonly KeyMode[] = ['live', 'test'];

/** The cluster members of the given identifiers (both modes), organisations left out; the given ones included. */
export async function personNodes(sql: Sql, workspaceId: string, given: readonly GraphNode[]): Promise<GraphNode[]> {
  const ids = MODES.flatMap((keyMode) => given.map((n) => nodeIdOf({ workspaceId, keyMode }, n)));
  const r = await sql.query<{ kind: GraphKind; value: string }>(
    `SELECT DISTINCT kind, value FROM identity_nodes
     WHERE cluster_id IN (SELECT cluster_id FROM identity_nodes WHERE node_id = ANY($1::text[])) AND kind <> 'organization'`,
    [ids],
  );
  const out = new Map(given.map((n) => [nodeKey(n), n]));
  for (const n of r.rows) out.set(nodeKey(n), { kind: n.kind, value: n.value });
  return [...out.values()];
}

/** Deletes the nodes (both modes). Returns how many. */
export async function deleteNodes(sql: Sql, workspaceId: string, nodes: readonly GraphNode[]): Promise<number> {
  const ids = MODES.flatMap((keyMode) => nodes.map((n) => nodeIdOf({ workspaceId, keyMode }, n)));
  const r = await sql.query('DELETE FROM identity_nodes WHERE node_id = ANY($1::text[]) RETURNING 1', [ids]);
  return r.rows.length;
}

/**
 * Deletes every edge with one end among the nodes (both modes). Returns how many. The `key_mode` condition holds for
 * every row: it lets the primary key (workspace, key mode, a's kind and value, …) find the edges by their a end;
 * identity_edges_b finds them by their b end.
 */
export async function deleteEdges(sql: Sql, workspaceId: string, nodes: readonly GraphNode[]): Promise<number> {
  if (nodes.length === 0) return 0;
  const kinds = nodes.map((n) => n.kind);
  const values = nodes.map((n) => n.value);
  const r = await sql.query(
    `DELETE FROM identity_edges e USING unnest($2::text[], $3::text[]) AS p(kind, value)
     WHERE e.workspace_id = $1 AND e.key_mode = ANY($4::text[])
       AND ((e.a_kind = p.kind AND e.a_value = p.value) OR (e.b_kind = p.kind AND e.b_value = p.value))
     RETURNING e.a_kind`,
    [workspaceId, kinds, values, MODES],
  );
  return r.rows.length;
}
