/**
 * The identity graph in SQL (migration 0003): nodes with their cluster label and last seen page data, and the
 * edges that linked them. Every write is an idempotent upsert keyed by the node or edge, so a replayed record
 * (the Kafka runtime runs this on a pool, outside the offset commit) changes nothing the first run did not.
 * Graph timestamps are the gateway's receive time of the event, not the processing time: a replay or a backlog
 * gives the same answers. Lookups go by node_id or cluster_id alone (both unique across workspaces and modes), so
 * each has one usable index and a plan that does not depend on statistics the embedded store never gathers.
 */
import type { Sql } from '../../shared/db/db.js';
import type { KeyMode } from '../../shared/envelope.js';
import { sha256Hex } from '../../shared/ids.js';
import { planCluster, type ClusterPlan } from './cluster-plan.js';
import type { PageData } from './identifiers.js';
import { KIND_RULES, STABLE_KINDS, nodeKey, type GraphKind, type GraphNode } from './kinds.js';

export interface GraphScope {
  readonly workspaceId: string;
  /** Test-mode traffic has a graph of its own: it never links with (or enriches) live traffic. */
  readonly keyMode: KeyMode;
}

export type LinkResult = Pick<ClusterPlan, 'refused' | 'resolved'>;

const iso = (ms: number): string => new Date(ms).toISOString();

/** The node's primary key. Cluster ids are unique across workspaces and modes too, so queries key on them alone. */
export const nodeIdOf = (scope: GraphScope, n: GraphNode): string =>
  sha256Hex(`${scope.workspaceId}\n${scope.keyMode}\n${n.kind}\n${n.value}`);

export class IdentityGraphRepo {
  constructor(private readonly opts: { readonly maxClusterIdentifiers: number }) {}

  /** Adds the event's nodes and links them (within the cap); stores its page data on them. */
  async link(sql: Sql, scope: GraphScope, nodes: readonly GraphNode[], seenAt: number, page: PageData | null): Promise<LinkResult> {
    if (nodes.length === 0) return { refused: false, resolved: null };
    const ws = scope.workspaceId;
    const mode = scope.keyMode;
    const ids = nodes.map((n) => nodeIdOf(scope, n));
    const found = await sql.query<{ node_id: string; cluster_id: string }>(
      'SELECT node_id, cluster_id FROM identity_nodes WHERE node_id = ANY($1::text[])',
      [ids],
    );
    const clusterById = new Map(found.rows.map((r) => [r.node_id, r.cluster_id]));
    const existing = new Map<string, string>();
    nodes.forEach((n, i) => {
      const c = clusterById.get(ids[i]!);
      if (c !== undefined) existing.set(nodeKey(n), c);
    });
    const clusters = [...new Set(nodes.filter((n) => KIND_RULES[n.kind].merges).flatMap((n) => existing.get(nodeKey(n)) ?? []))];
    const stableCounts = new Map<string, number>();
    const freshStable = nodes.some((n) => KIND_RULES[n.kind].stable && KIND_RULES[n.kind].merges && !existing.has(nodeKey(n)));
    // Sizes matter only when clusters may grow: several to fuse, or new stable identifiers to add. A returning
    // visitor (everything known, one cluster) needs no count.
    if (clusters.length > 1 || (clusters.length === 1 && freshStable)) {
      // Counted from the nodes themselves rather than kept as a counter: always right, even after a replay.
      const counts = await sql.query<{ cluster_id: string; n: number }>(
        `SELECT cluster_id, count(*)::int AS n FROM identity_nodes
         WHERE cluster_id = ANY($1::text[]) AND kind = ANY($2::text[]) GROUP BY cluster_id`,
        [clusters, STABLE_KINDS],
      );
      for (const r of counts.rows) stableCounts.set(r.cluster_id, Number(r.n));
    }
    const plan = planCluster({ workspaceId: ws, keyMode: mode, nodes, existing, stableCounts, cap: this.opts.maxClusterIdentifiers });

    if (plan.merge) {
      await sql.query('UPDATE identity_nodes SET cluster_id = $1 WHERE cluster_id = ANY($2::text[])', [plan.merge.into, plan.merge.from]);
    }
    // NOTE: ON CONFLICT never changes a node's cluster: only a merge (above) relabels.
    await sql.query(
      `INSERT INTO identity_nodes AS n (node_id, workspace_id, key_mode, kind, value, cluster_id, first_seen_at, last_seen_at,
                                        page_location, user_agent, page_seen_at)
       SELECT t.node_id, $1, $2, t.kind, t.value, t.cluster_id, $6::timestamptz, $6::timestamptz, $7, $8, $9::timestamptz
       FROM unnest($10::text[], $3::text[], $4::text[], $5::text[]) AS t(node_id, kind, value, cluster_id)
       ON CONFLICT (node_id) DO UPDATE SET
         first_seen_at = LEAST(n.first_seen_at, EXCLUDED.first_seen_at),
         last_seen_at = GREATEST(n.last_seen_at, EXCLUDED.last_seen_at),
         page_location = CASE WHEN EXCLUDED.page_seen_at >= n.page_seen_at OR n.page_seen_at IS NULL
                              THEN COALESCE(EXCLUDED.page_location, n.page_location) ELSE n.page_location END,
         user_agent = CASE WHEN EXCLUDED.page_seen_at >= n.page_seen_at OR n.page_seen_at IS NULL
                           THEN COALESCE(EXCLUDED.user_agent, n.user_agent) ELSE n.user_agent END,
         page_seen_at = GREATEST(n.page_seen_at, EXCLUDED.page_seen_at)`,
      [
        ws,
        mode,
        nodes.map((n) => n.kind),
        nodes.map((n) => n.value),
        nodes.map((n) => plan.clusterOf.get(nodeKey(n))!),
        iso(seenAt),
        page?.page_location ?? null,
        page?.user_agent ?? null,
        page ? iso(seenAt) : null,
        ids,
      ],
    );
    // Edges are evidence of a link: an event that adds no node and fuses nothing links nothing new.
    if (plan.merge || found.rows.length < nodes.length) await this.addEdges(sql, scope, nodes, plan, seenAt);
    return { refused: plan.refused, resolved: plan.resolved };
  }

  /**
   * Edges record which identifiers were seen together (the evidence behind a cluster, e.g. to rebuild or unlink
   * later). A star from the event's best identifier to each node it was linked with; refused links get no edge.
   */
  private async addEdges(sql: Sql, scope: GraphScope, nodes: readonly GraphNode[], plan: ClusterPlan, seenAt: number): Promise<void> {
    const anchor = nodes.find((n) => KIND_RULES[n.kind].merges);
    if (!anchor) return;
    const linked = nodes.filter(
      (n) => n !== anchor && (!KIND_RULES[n.kind].merges || plan.clusterOf.get(nodeKey(n)) === plan.resolved),
    );
    if (linked.length === 0) return;
    // Stored in a canonical order so that (a, b) and (b, a) are one edge.
    const pairs = linked.map((n) => (nodeKey(anchor) < nodeKey(n) ? [anchor, n] : [n, anchor]) as [GraphNode, GraphNode]);
    await sql.query(
      `INSERT INTO identity_edges AS e (workspace_id, key_mode, a_kind, a_value, b_kind, b_value, first_seen_at, last_seen_at)
       SELECT $1, $2, t.ak, t.av, t.bk, t.bv, $7::timestamptz, $7::timestamptz
       FROM unnest($3::text[], $4::text[], $5::text[], $6::text[]) AS t(ak, av, bk, bv)
       ON CONFLICT (workspace_id, key_mode, a_kind, a_value, b_kind, b_value) DO UPDATE SET
         first_seen_at = LEAST(e.first_seen_at, EXCLUDED.first_seen_at),
         last_seen_at = GREATEST(e.last_seen_at, EXCLUDED.last_seen_at)`,
      [
        scope.workspaceId,
        scope.keyMode,
        pairs.map((p) => p[0].kind),
        pairs.map((p) => p[0].value),
        pairs.map((p) => p[1].kind),
        pairs.map((p) => p[1].value),
        iso(seenAt),
      ],
    );
  }

  /** The cluster's newest identifiers of the given kinds, at most `perKind` each, newest first. */
  async identifiers(sql: Sql, clusterId: string, kinds: readonly GraphKind[], perKind: number): Promise<GraphNode[]> {
    // NOTE: a cluster holds at most the cap of stable identifiers, so reading them all and ranking here is cheap.
    const r = await sql.query<GraphNode>(
      'SELECT kind, value FROM identity_nodes WHERE cluster_id = $1 AND kind = ANY($2::text[]) ORDER BY last_seen_at DESC, value',
      [clusterId, kinds],
    );
    const taken = new Map<string, number>();
    return r.rows.filter((n) => {
      const k = (taken.get(n.kind) ?? 0) + 1;
      taken.set(n.kind, k);
      return k <= perKind;
    });
  }

  /** The newest click id of the cluster first seen in (at - windowMs, at]: a click after the conversion cannot have led to it. */
  async newestClickId(sql: Sql, clusterId: string, at: number, windowMs: number): Promise<string | undefined> {
    const r = await sql.query<{ value: string }>(
      `SELECT value FROM identity_nodes
       WHERE cluster_id = $1 AND kind = 'ttclid' AND first_seen_at > $2::timestamptz AND first_seen_at <= $3::timestamptz
       ORDER BY first_seen_at DESC, value LIMIT 1`,
      [clusterId, iso(at - windowMs), iso(at)],
    );
    return r.rows[0]?.value;
  }

  /** The cluster's newest session data (page location and user agent of its last seen web event; one with a URL first). */
  async newestPageData(sql: Sql, clusterId: string): Promise<PageData | undefined> {
    const r = await sql.query<PageData>(
      `SELECT page_location, user_agent FROM identity_nodes
       WHERE cluster_id = $1 AND page_seen_at IS NOT NULL
       ORDER BY page_location IS NULL, page_seen_at DESC, kind, value LIMIT 1`,
      [clusterId],
    );
    return r.rows[0];
  }
}
