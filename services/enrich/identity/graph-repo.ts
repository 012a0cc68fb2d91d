/**
 * The identity graph's queryable tables, identity_nodes and identity_edges: written by the graph sink from the
 * changes enrich's partition-local state emits; read by the console, erasure, retention and a replay. A replay
 * loads whole clusters into a GraphSnapshot and applies a batch in memory by the rules of cluster-plan.ts, writing
 * nothing; the tests hold the live state (graph-state.ts) against it. Graph times are the events' receive times, so
 * a replay or a backlog gives the same answers; ties are broken by the values in code-unit order.
 */
import type { Sql } from '../../shared/db/db.js';
import { graphOwnerKey, type KeyMode } from '../../domain/envelope.js';
import { sha256Hex } from '../../shared/ids.js';
import { planCluster, type ClusterPlan } from './cluster-plan.js';
import type { PageData } from './identifiers.js';
import { KIND_RULES, nodeKey, type GraphKind, type GraphNode } from './kinds.js';

export interface GraphScope {
  readonly workspaceId: string;
  /** Test-mode traffic has a graph of its own: it never links with (or enriches) live traffic. */
  readonly keyMode: KeyMode;
}

export type LinkResult = Pick<ClusterPlan, 'refused' | 'resolved'>;

/** The node's primary key. Cluster ids are unique across workspaces and modes too, so queries key on them alone. */
export const nodeIdOf = (scope: GraphScope, n: GraphNode): string =>
  sha256Hex(`${scope.workspaceId}\n${scope.keyMode}\n${n.kind}\n${n.value}`);

/** The graph's key: events.deduped and identity.graph-changes are keyed by it, so one partition owns a graph. */
export const graphKey = (scope: GraphScope): string => graphOwnerKey({ workspace_id: scope.workspaceId, key_mode: scope.keyMode });

export interface NodeRow {
  readonly node_id: string;
  readonly workspace_id: string;
  readonly key_mode: KeyMode;
  readonly kind: GraphKind;
  readonly value: string;
  cluster_id: string;
  first_seen_at: number;
  last_seen_at: number;
  page_location: string | null;
  user_agent: string | null;
  page_seen_at: number | null;
  /** Consent withdrawal (migration 0010): the newest event of the cluster that withheld the purpose, as seen by this node. */
  ad_user_data_withdrawn_at: number | null;
  ad_storage_withdrawn_at: number | null;
}

export interface EdgeRow {
  readonly workspace_id: string;
  readonly key_mode: KeyMode;
  readonly a_kind: string;
  readonly a_value: string;
  readonly b_kind: string;
  readonly b_value: string;
  first_seen_at: number;
  last_seen_at: number;
}

/** The graph's tie-breaks: by value, by string (code units). */
export const byValue = (a: { value: string }, b: { value: string }): number => (a.value < b.value ? -1 : a.value > b.value ? 1 : 0);
export const byString = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * What offeredIdentifiers answers of a cluster's offered nodes (sorted here, in place): the newest first (ties by
 * value), at most `perKind` of each kind. The live state and the snapshot rank alike.
 */
export function newestPerKind(offered: Array<{ readonly kind: GraphKind; readonly value: string; readonly first_seen_at: number; readonly last_seen_at: number }>, perKind: number): OfferedNode[] {
  offered.sort((a, b) => b.last_seen_at - a.last_seen_at || byValue(a, b));
  const out: OfferedNode[] = [];
  const taken = new Map<string, number>();
  for (const n of offered) {
    const k = (taken.get(n.kind) ?? 0) + 1;
    taken.set(n.kind, k);
    if (k <= perKind) out.push({ kind: n.kind, value: n.value, firstSeenAt: n.first_seen_at, lastSeenAt: n.last_seen_at });
  }
  return out;
}

/** An identifier the graph offers, with when consenting events saw it (epoch ms): the "why" of a forwarded field. */
export interface OfferedNode extends GraphNode {
  readonly firstSeenAt: number;
  readonly lastSeenAt: number;
}

/** What the conversion steps read of an event's cluster (answered from the snapshot). */
export interface ClusterReader {
  /**
   * The cluster's newest identifiers of the given kinds, at most `perKind` each, newest first. Consent withdrawal
   * (docs/consent.md): an identifier last seen before the cluster's newest withdrawal of a purpose it needs is not
   * offered.
   */
  identifiers(clusterId: string, kinds: readonly GraphKind[], perKind: number): GraphNode[];
  /** identifiers(), with when each was seen. */
  offeredIdentifiers(clusterId: string, kinds: readonly GraphKind[], perKind: number): OfferedNode[];
  /** The newest click id of the cluster first seen in (at - windowMs, at]: a click after the conversion cannot have led to it. */
  newestClickId(clusterId: string, at: number, windowMs: number): string | undefined;
  /** The cluster's newest session data (page location and user agent of its last seen web event; one with a URL first). */
  newestPageData(clusterId: string): PageData | undefined;
}

/**
 * Edges record which identifiers were seen together (the evidence behind a cluster, e.g. to rebuild or unlink
 * later): a star from the event's best identifier to each node it was linked with; refused links get no edge.
 */
/**
 * The event's links as edges from its anchor (its first lasting identifier: user id, email, phone, client id). An
 * edge is evidence that two identifiers are one person, so sessions and click ids (one visit each) get none; when the
 * event merged nothing and its anchor was known, only edges to new identifiers and organisations are written.
 * `existing`: the identifiers known before the event, by nodeKey.
 */
export function addEventEdges(
  edges: Map<string, EdgeRow>,
  scope: GraphScope,
  nodes: readonly GraphNode[],
  plan: ClusterPlan,
  seenAt: number,
  existing: ReadonlyMap<string, string>,
): void {
  const anchor = nodes.find((n) => KIND_RULES[n.kind].merges && KIND_RULES[n.kind].stable);
  if (!anchor) return;
  const all = plan.merge !== null || !existing.has(nodeKey(anchor));
  for (const n of nodes) {
    if (n === anchor) continue;
    const rule = KIND_RULES[n.kind];
    // A session or click id, a link the cap refused, or an identifier already in the anchor's cluster: no new evidence.
    if (rule.merges && (!rule.stable || plan.clusterOf.get(nodeKey(n)) !== plan.resolved || (!all && existing.has(nodeKey(n))))) continue;
    // Stored in a canonical order so that (a, b) and (b, a) are one edge.
    const [a, b] = nodeKey(anchor) < nodeKey(n) ? [anchor, n] : [n, anchor];
    const key = `${scope.workspaceId}\n${scope.keyMode}\n${nodeKey(a)}\n${nodeKey(b)}`;
    const edge = edges.get(key);
    if (edge) {
      edge.first_seen_at = Math.min(edge.first_seen_at, seenAt);
      edge.last_seen_at = Math.max(edge.last_seen_at, seenAt);
    } else {
      edges.set(key, { workspace_id: scope.workspaceId, key_mode: scope.keyMode, a_kind: a.kind, a_value: a.value, b_kind: b.kind, b_value: b.value, first_seen_at: seenAt, last_seen_at: seenAt });
    }
  }
}

/**
 * The nodes that keep an event's page data (its session data): in each cluster its nodes are in after the link, the
 * first by kind and value, the one the reads prefer among nodes with the same page time (newestPageData). The rest of
 * its nodes are not written for it: a returning visitor's identifiers are not rewritten at every page. A cluster's
 * newest session data is so one visit's location and user agent together. Organisations (clusters of their own,
 * never read for page data) keep none.
 */
export function pageHolders(nodes: readonly GraphNode[], plan: ClusterPlan): Set<GraphNode> {
  const first = new Map<string, GraphNode>();
  for (const n of nodes) {
    if (!KIND_RULES[n.kind].merges) continue;
    const cluster = plan.clusterOf.get(nodeKey(n))!;
    const prior = first.get(cluster);
    if (!prior || (byString(n.kind, prior.kind) || byValue(n, prior)) < 0) first.set(cluster, n);
  }
  return new Set(first.values());
}

/** The clusters a batch touches, whole, with the batch's changes applied in order. */
export class GraphSnapshot implements ClusterReader {
  private readonly nodes = new Map<string, NodeRow>();
  private readonly members = new Map<string, Set<string>>();
  private readonly dirty = new Set<string>();
  private readonly edges = new Map<string, EdgeRow>();
  /** node_id by scope and node: each is a SHA-256, computed once per batch. */
  private readonly ids = new Map<string, string>();

  constructor(private readonly opts: { readonly maxClusterIdentifiers: number }) {}

  /** The rows of the clusters read from the store (before any link). */
  load(rows: readonly NodeRow[]): void {
    for (const r of rows) this.put(r);
  }

  idOf(scope: GraphScope, n: GraphNode): string {
    const k = `${scope.workspaceId}\n${scope.keyMode}\n${n.kind}\n${n.value}`;
    let id = this.ids.get(k);
    if (id === undefined) this.ids.set(k, (id = nodeIdOf(scope, n)));
    return id;
  }

  private put(r: NodeRow): void {
    this.nodes.set(r.node_id, r);
    let m = this.members.get(r.cluster_id);
    if (!m) this.members.set(r.cluster_id, (m = new Set()));
    m.add(r.node_id);
  }

  private relabel(from: string, into: string): void {
    const moving = this.members.get(from);
    if (!moving) return;
    let target = this.members.get(into);
    if (!target) this.members.set(into, (target = new Set()));
    for (const id of moving) {
      this.nodes.get(id)!.cluster_id = into;
      target.add(id);
      this.dirty.add(id);
    }
    this.members.delete(from);
  }

  private stableCount(clusterId: string): number {
    let n = 0;
    for (const id of this.members.get(clusterId) ?? []) if (KIND_RULES[this.nodes.get(id)!.kind].stable) n++;
    return n;
  }

  /** Adds the event's nodes and links them (within the cap); stores its page data (pageHolders). One event's rules. */
  link(scope: GraphScope, nodes: readonly GraphNode[], seenAt: number, page: PageData | null): LinkResult {
    if (nodes.length === 0) return { refused: false, resolved: null };
    const ids = nodes.map((n) => this.idOf(scope, n));
    const existing = new Map<string, string>();
    let found = 0;
    nodes.forEach((n, i) => {
      const row = this.nodes.get(ids[i]!);
      if (row) {
        existing.set(nodeKey(n), row.cluster_id);
        found++;
      }
    });
    const stableCounts = new Map<string, number>();
    for (const c of new Set(existing.values())) stableCounts.set(c, this.stableCount(c));
    const plan = planCluster({
      workspaceId: scope.workspaceId,
      keyMode: scope.keyMode,
      nodes,
      existing,
      stableCounts,
      cap: this.opts.maxClusterIdentifiers,
    });
    if (plan.merge) for (const from of plan.merge.from) this.relabel(from, plan.merge.into);

    const holders = page ? pageHolders(nodes, plan) : null;
    nodes.forEach((n, i) => {
      const id = ids[i]!;
      const row = this.nodes.get(id);
      const own = holders?.has(n) ? page : null;
      const pageAt = own ? seenAt : null;
      this.dirty.add(id);
      if (!row) {
        this.put({
          node_id: id,
          workspace_id: scope.workspaceId,
          key_mode: scope.keyMode,
          kind: n.kind,
          value: n.value,
          cluster_id: plan.clusterOf.get(nodeKey(n))!,
          first_seen_at: seenAt,
          last_seen_at: seenAt,
          page_location: own?.page_location ?? null,
          user_agent: own?.user_agent ?? null,
          page_seen_at: pageAt,
          ad_user_data_withdrawn_at: null,
          ad_storage_withdrawn_at: null,
        });
        return;
      }
      // NOTE: an existing node never changes its cluster here: only a merge (above) relabels.
      row.first_seen_at = Math.min(row.first_seen_at, seenAt);
      row.last_seen_at = Math.max(row.last_seen_at, seenAt);
      if (pageAt !== null && (row.page_seen_at === null || pageAt >= row.page_seen_at)) {
        row.page_location = own!.page_location ?? row.page_location;
        row.user_agent = own!.user_agent ?? row.user_agent;
      }
      if (pageAt !== null) row.page_seen_at = row.page_seen_at === null ? pageAt : Math.max(row.page_seen_at, pageAt);
    });
    // Edges are evidence of a link: an event that adds no node and fuses nothing links nothing new.
    if (plan.merge || found < nodes.length) addEventEdges(this.edges, scope, nodes, plan, seenAt, existing);
    return { refused: plan.refused, resolved: plan.resolved };
  }

  /**
   * Consent withdrawal: an event that withheld ad_storage or ad_user_data marks the clusters its identifiers belong
   * to (it adds nothing to them). Kept on every member node, so a merge carries it into the merged cluster.
   */
  withdraw(scope: GraphScope, nodes: readonly GraphNode[], at: number, purposes: { readonly adStorage: boolean; readonly adUserData: boolean }): void {
    if (!purposes.adStorage && !purposes.adUserData) return;
    const clusters = new Set<string>();
    for (const n of nodes) {
      const row = this.nodes.get(this.idOf(scope, n));
      if (row) clusters.add(row.cluster_id);
    }
    for (const c of clusters) {
      for (const id of this.members.get(c) ?? []) {
        const row = this.nodes.get(id)!;
        if (purposes.adStorage) row.ad_storage_withdrawn_at = Math.max(row.ad_storage_withdrawn_at ?? at, at);
        if (purposes.adUserData) row.ad_user_data_withdrawn_at = Math.max(row.ad_user_data_withdrawn_at ?? at, at);
        this.dirty.add(id);
      }
    }
  }

  /** The cluster's newest withdrawals (epoch ms; -Infinity: none). */
  private withdrawals(clusterId: string): { storage: number; userData: number } {
    let storage = -Infinity;
    let userData = -Infinity;
    for (const r of this.rowsOf(clusterId)) {
      if (r.ad_storage_withdrawn_at !== null) storage = Math.max(storage, r.ad_storage_withdrawn_at);
      if (r.ad_user_data_withdrawn_at !== null) userData = Math.max(userData, r.ad_user_data_withdrawn_at);
    }
    return { storage, userData };
  }

  /** Seen by a consenting event after the cluster's last withdrawal of what its kind needs. */
  private offered(r: NodeRow, w: { storage: number; userData: number }): boolean {
    const since = KIND_RULES[r.kind].personal ? Math.max(w.storage, w.userData) : w.storage;
    return r.last_seen_at > since;
  }

  private rowsOf(clusterId: string): NodeRow[] {
    return [...(this.members.get(clusterId) ?? [])].map((id) => this.nodes.get(id)!);
  }

  identifiers(clusterId: string, kinds: readonly GraphKind[], perKind: number): GraphNode[] {
    return this.offeredIdentifiers(clusterId, kinds, perKind).map((n) => ({ kind: n.kind, value: n.value }));
  }

  offeredIdentifiers(clusterId: string, kinds: readonly GraphKind[], perKind: number): OfferedNode[] {
    const w = this.withdrawals(clusterId);
    return newestPerKind(this.rowsOf(clusterId).filter((r) => kinds.includes(r.kind) && this.offered(r, w)), perKind);
  }

  newestClickId(clusterId: string, at: number, windowMs: number): string | undefined {
    const w = this.withdrawals(clusterId);
    return this.rowsOf(clusterId)
      .filter((r) => r.kind === 'ttclid' && r.first_seen_at > at - windowMs && r.first_seen_at <= at && this.offered(r, w))
      .sort((a, b) => b.first_seen_at - a.first_seen_at || byValue(a, b))[0]?.value;
  }

  newestPageData(clusterId: string): PageData | undefined {
    const { storage } = this.withdrawals(clusterId);
    const r = this.rowsOf(clusterId)
      .filter((n) => n.page_seen_at !== null && n.page_seen_at > storage)
      .sort(
        (a, b) =>
          Number(a.page_location === null) - Number(b.page_location === null) ||
          b.page_seen_at! - a.page_seen_at! ||
          byString(a.kind, b.kind) ||
          byValue(a, b),
      )[0];
    return r ? { page_location: r.page_location, user_agent: r.user_agent } : undefined;
  }

  /** What the batch changed, for saveGraph. */
  changes(): { readonly nodes: NodeRow[]; readonly edges: EdgeRow[] } {
    return { nodes: [...this.dirty].map((id) => this.nodes.get(id)!), edges: [...this.edges.values()] };
  }
}

/** Loads, whole, every cluster that one of these nodes belongs to (one query). */
export async function loadGraph(
  sql: Sql,
  nodes: ReadonlyArray<{ readonly scope: GraphScope; readonly node: GraphNode }>,
  opts: { readonly maxClusterIdentifiers: number },
): Promise<GraphSnapshot> {
  const snapshot = new GraphSnapshot(opts);
  if (nodes.length === 0) return snapshot;
  const ids = [...new Set(nodes.map((n) => snapshot.idOf(n.scope, n.node)))];
  // Times as epoch milliseconds (float8): cheaper to read than timestamps parsed into Dates, and exact to the ms.
  const r = await sql.query<NodeRow>(
    `SELECT node_id, workspace_id, key_mode, kind, value, cluster_id,
            (extract(epoch from first_seen_at) * 1000)::float8 AS first_seen_at,
            (extract(epoch from last_seen_at) * 1000)::float8 AS last_seen_at,
            page_location, user_agent,
            (extract(epoch from page_seen_at) * 1000)::float8 AS page_seen_at,
            (extract(epoch from ad_user_data_withdrawn_at) * 1000)::float8 AS ad_user_data_withdrawn_at,
            (extract(epoch from ad_storage_withdrawn_at) * 1000)::float8 AS ad_storage_withdrawn_at
     FROM identity_nodes WHERE cluster_id IN (SELECT cluster_id FROM identity_nodes WHERE node_id = ANY($1::text[]))`,
    [ids],
  );
  const num = (v: number | null): number | null => (v === null ? null : Number(v));
  snapshot.load(
    r.rows.map((row) => ({
      ...row,
      first_seen_at: Number(row.first_seen_at),
      last_seen_at: Number(row.last_seen_at),
      page_seen_at: num(row.page_seen_at),
      ad_user_data_withdrawn_at: num(row.ad_user_data_withdrawn_at),
      ad_storage_withdrawn_at: num(row.ad_storage_withdrawn_at),
    })),
  );
  return snapshot;
}

/** Writes what a snapshot changed: one upsert of nodes, one of edges. */
export async function saveGraph(sql: Sql, snapshot: GraphSnapshot): Promise<void> {
  const { nodes, edges } = snapshot.changes();
  await upsertNodes(sql, nodes);
  await upsertEdges(sql, edges);
}

/** One upsert of node rows: each row is the node as it is now. */
export async function upsertNodes(sql: Sql, nodes: readonly NodeRow[]): Promise<void> {
  if (nodes.length === 0) return;
  // One JSON parameter (cheaper than eleven array parameters on PGlite, see stream/embedded/log.ts).
  await sql.query(
    `INSERT INTO identity_nodes AS n (node_id, workspace_id, key_mode, kind, value, cluster_id, first_seen_at, last_seen_at,
                                      page_location, user_agent, page_seen_at, ad_user_data_withdrawn_at, ad_storage_withdrawn_at)
     SELECT node_id, workspace_id, key_mode, kind, value, cluster_id, to_timestamp(first_seen_at / 1000.0), to_timestamp(last_seen_at / 1000.0),
            page_location, user_agent, to_timestamp(page_seen_at / 1000.0),
            to_timestamp(ad_user_data_withdrawn_at / 1000.0), to_timestamp(ad_storage_withdrawn_at / 1000.0)
     FROM json_to_recordset($1::json) AS t(node_id text, workspace_id text, key_mode text, kind text, value text, cluster_id text,
          first_seen_at float8, last_seen_at float8, page_location text, user_agent text, page_seen_at float8,
          ad_user_data_withdrawn_at float8, ad_storage_withdrawn_at float8)
     ON CONFLICT (node_id) DO UPDATE SET
       cluster_id = EXCLUDED.cluster_id, first_seen_at = EXCLUDED.first_seen_at, last_seen_at = EXCLUDED.last_seen_at,
       page_location = EXCLUDED.page_location, user_agent = EXCLUDED.user_agent, page_seen_at = EXCLUDED.page_seen_at,
       ad_user_data_withdrawn_at = EXCLUDED.ad_user_data_withdrawn_at, ad_storage_withdrawn_at = EXCLUDED.ad_storage_withdrawn_at`,
    [JSON.stringify(nodes)],
  );
}

/**
 * Moves nodes' last_seen_at forward (never back): node id → epoch ms. A node without a row is left so (its next whole
 * write brings it back).
 */
export async function updateLastSeen(sql: Sql, lastSeen: ReadonlyMap<string, number>): Promise<void> {
  if (lastSeen.size === 0) return;
  await sql.query(
    `UPDATE identity_nodes AS n SET last_seen_at = to_timestamp(t.at / 1000.0)
     FROM json_to_recordset($1::json) AS t(id text, at float8)
     WHERE n.node_id = t.id AND n.last_seen_at < to_timestamp(t.at / 1000.0)`,
    [JSON.stringify(Array.from(lastSeen, ([id, at]) => ({ id, at })))],
  );
}

/** One upsert of edges: an edge keeps the earliest first and the latest last sighting. */
export async function upsertEdges(sql: Sql, edges: readonly EdgeRow[]): Promise<void> {
  if (edges.length === 0) return;
  await sql.query(
    `INSERT INTO identity_edges AS e (workspace_id, key_mode, a_kind, a_value, b_kind, b_value, first_seen_at, last_seen_at)
     SELECT workspace_id, key_mode, a_kind, a_value, b_kind, b_value, to_timestamp(first_seen_at / 1000.0), to_timestamp(last_seen_at / 1000.0)
     FROM json_to_recordset($1::json) AS t(workspace_id text, key_mode text, a_kind text, a_value text, b_kind text, b_value text,
          first_seen_at float8, last_seen_at float8)
     ON CONFLICT (workspace_id, key_mode, a_kind, a_value, b_kind, b_value) DO UPDATE SET
       first_seen_at = LEAST(e.first_seen_at, EXCLUDED.first_seen_at),
       last_seen_at = GREATEST(e.last_seen_at, EXCLUDED.last_seen_at)`,
    [JSON.stringify(edges)],
  );
}
