/**
 * The identity graph as enrich's partition-local state in the runtime's keyed store. events.deduped is keyed by the
 * graph (workspace and key mode), so one partition owns a graph: a single writer, no lock.
 *
 * An event reads and writes only what it touches: an entry per identifier (`NodeState`) and one per cluster
 * (`ClusterState`, a summary of exactly what the reads need). A cluster's click ids are in its summary while they are
 * few (INLINE_CLICKS), and in an entry of their own (`ClickListState`) beyond, so that the many events that add none
 * do not write them again. A merge folds the smaller summary into the larger and leaves a forward (`into`), so member
 * entries are never relabelled. Session and click-id entries age out
 * (EPHEMERAL_RETENTION). A stable identifier's entry is not rewritten for an event that changes only when it was last
 * seen (a server event's, within NODE_REFRESH_MS of its last write): its cluster's member keeps that time, and the
 * changes carry it as a sighting (its id and that time), not as a whole row. The queryable tables are written off the
 * hot path by graph-sink.ts from `GraphChanges`.
 * The reads must answer what GraphSnapshot (graph-repo.ts) answers over whole clusters (graph-state.test.ts).
 */
import type { KeyValueStore } from '../../stream/store.js';
import { planCluster, type ClusterPlan } from './cluster-plan.js';
import type { ClusterReader, EdgeRow, GraphScope, LinkResult, NodeRow, OfferedNode } from './graph-repo.js';
import { addEventEdges, byString, byValue, newestPerKind, nodeIdOf, pageHolders } from './graph-repo.js';
import type { PageData } from './identifiers.js';
import { KIND_RULES, nodeKey, type GraphKind, type GraphNode } from './kinds.js';

export interface NodeState {
  /** The cluster the node joined (possibly merged since: follow the cluster's `into`). */
  cluster: string;
  first_seen_at: number;
  /**
   * For a stable identifier, up to NODE_REFRESH_MS older than when it was last seen: its cluster's member (MemberState)
   * has the time, and the reads and the rows take it from there.
   */
  last_seen_at: number;
  page_location: string | null;
  user_agent: string | null;
  page_seen_at: number | null;
}

export interface MemberState {
  readonly kind: GraphKind;
  readonly value: string;
  first_seen_at: number;
  last_seen_at: number;
}

/** A node's page data as a candidate for the cluster's newest session data. */
export interface PageCandidate {
  readonly kind: GraphKind;
  readonly value: string;
  readonly page_location: string | null;
  readonly user_agent: string | null;
  readonly page_seen_at: number;
}

export interface ClusterState {
  /** Set when the cluster was merged into another: then nothing else is kept. */
  into: string | null;
  /** Its stable identifiers (bounded by the size cap). */
  members: MemberState[];
  /** Its click ids while they are at most INLINE_CLICKS (absent: none, or they are in the cluster's ClickListState). */
  clicks?: MemberState[];
  /**
   * In the store only: whether its click ids are in a ClickListState of their own, so that a read looks for one only
   * then. Absent or null in an entry written before the field: not known, and a read looks.
   */
  clicks_apart?: boolean | null;
  /**
   * The node with the newest page data among those with a page location, and among all. In the store, `page_any` is
   * null when it is the same as `page_with_location` (most clusters: a web event brings both): never otherwise while
   * there is a `page_with_location`, which is also a candidate for `page_any`.
   */
  page_with_location: PageCandidate | null;
  page_any: PageCandidate | null;
  ad_storage_withdrawn_at: number | null;
  ad_user_data_withdrawn_at: number | null;
}

/**
 * A cluster's newest click ids by first seen (at most MAX_CLICKS, none older than the longest click window), once
 * there are more than INLINE_CLICKS.
 */
export interface ClickListState {
  clicks: MemberState[];
}

export type GraphEntry = NodeState | ClusterState | ClickListState;

const DAY_MS = 24 * 3600_000;
/**
 * How long after its last write a stable identifier's entry is rewritten for an event that changes nothing else of it
 * (a server event's, with no page data): it then ages out (by its last write) at most this much before its retention
 * from when it was last seen.
 */
export const NODE_REFRESH_MS = 3600_000;
/** Click ids a cluster keeps as attribution candidates. */
export const MAX_CLICKS = 32;
/**
 * Click ids a cluster's summary holds itself; more go to an entry of their own. Inline, each costs ~50 bytes on every
 * write of the summary (most events write it); apart, a change costs one more changelog record.
 */
export const INLINE_CLICKS = 4;
/** The longest click window a forwarding setup may have (console/routes/forwarding.ts). */
export const MAX_CLICK_WINDOW_MS = 90 * DAY_MS;

/** Key prefixes of the store: one per node kind, and the clusters'. */
const KIND_TAG: Readonly<Record<GraphKind, string>> = {
  user_id: 'u',
  email_sha256: 'e',
  email_canonical_sha256: 'E',
  phone_e164_sha256: 'p',
  phone_numeric_sha256: 'P',
  client_id: 'k',
  session_id: 's',
  ttclid: 't',
  fbclid: 'f',
  gclid: 'g',
  gbraid: 'b',
  wbraid: 'w',
  organization: 'o',
};
const CLUSTER_TAG = 'c';
const CLICKS_TAG = 'l';
const SEP = '\u001f';

/**
 * How long an entry of the graph stays without being written, by key prefix: sessions and click ids age out (a click
 * id after the longest click window, a session after two days); the rest stays for the graph's retention.
 */
export const EPHEMERAL_RETENTION: Readonly<Record<string, number>> = {
  [KIND_TAG.session_id + SEP]: 2 * DAY_MS,
  ...Object.fromEntries((['ttclid', 'fbclid', 'gclid', 'gbraid', 'wbraid'] as const).map((k) => [KIND_TAG[k] + SEP, MAX_CLICK_WINDOW_MS])),
};

/**
 * An identifier's key: its kind's tag and its node id (the SHA-256 of workspace, key mode, kind and value that
 * identity_nodes is keyed by), so an erasure record names what goes without carrying the identifiers.
 */
export const nodeStoreKey = (scope: GraphScope, n: GraphNode): string => `${KIND_TAG[n.kind]}${SEP}${nodeIdOf(scope, n)}`;
const nodeIdOfKey = (key: string): string => key.slice(2);
/** The cluster a node founds: cluster-plan.ts's clusterIdFor is `c_` and the first 32 hex digits of the node id its key holds. */
const foundedBy = (key: string): string => `c_${nodeIdOfKey(key).slice(0, 32)}`;
const KIND_OF_TAG = new Map(Object.entries(KIND_TAG).map(([kind, tag]) => [tag, kind as GraphKind]));
const kindOfKey = (key: string): GraphKind | undefined => KIND_OF_TAG.get(key[0]!);
export const clusterStoreKey = (clusterId: string): string => `${CLUSTER_TAG}${SEP}${clusterId}`;
export const clickListStoreKey = (clusterId: string): string => `${CLICKS_TAG}${SEP}${clusterId}`;

export interface NodeSighting {
  readonly node_id: string;
  readonly last_seen_at: number;
}

/** What a batch changed in the graph, for the queryable tables (one record per graph and batch). */
export interface GraphChanges {
  readonly workspace_id: string;
  readonly key_mode: GraphScope['keyMode'];
  /** Clusters folded into others, in order. */
  readonly merges: ReadonlyArray<{ readonly from: string; readonly into: string }>;
  /** The nodes the batch changed, with their cluster after the batch. */
  readonly nodes: readonly NodeRow[];
  /** Nodes whose only change is a later sighting (their store entry was not rewritten): when they were last seen. */
  readonly sightings: readonly NodeSighting[];
  readonly edges: readonly EdgeRow[];
  /** Consent withdrawals, by the cluster (after the batch) they apply to. */
  readonly withdrawals: ReadonlyArray<{ readonly cluster_id: string; readonly ad_storage_withdrawn_at: number | null; readonly ad_user_data_withdrawn_at: number | null }>;
  /** Erasures: the clusters whose nodes go, and nodes to delete by node id (both after the rest). */
  readonly erased_clusters: readonly string[];
  readonly erased_node_ids: readonly string[];
}

const maxOrNull = (a: number | null, b: number | null): number | null => (a === null ? b : b === null ? a : Math.max(a, b));

/** Order of page candidates within one list: newest page data first, then kind and value (GraphSnapshot's ties). */
function better(a: PageCandidate, b: PageCandidate | null): boolean {
  if (!b) return true;
  return a.page_seen_at !== b.page_seen_at ? a.page_seen_at > b.page_seen_at : (byString(a.kind, b.kind) || byValue(a, b)) < 0;
}

const emptyCluster = (): ClusterState => ({
  into: null,
  members: [],
  page_with_location: null,
  page_any: null,
  ad_storage_withdrawn_at: null,
  ad_user_data_withdrawn_at: null,
});

/** One event's part in a batch's load. */
export interface TouchedEvent {
  readonly scope: GraphScope;
  /** The nodes the event links, in the order it links them (identifiers.ts: highest priority first). */
  readonly nodes: readonly GraphNode[];
  /** Nodes it only looks up (a consent withdrawal's withheld identifiers find the clusters it applies to). */
  readonly lookedUp?: readonly GraphNode[];
}

export interface GraphStateOptions {
  readonly maxClusterIdentifiers: number;
  /** Stable identifiers not seen for this long leave their cluster's summary (the graph's retention). */
  readonly retentionMs?: number;
}

/** The part of the graph one batch touches, read from the store in a few rounds, changed in memory, then written. */
export class GraphState implements ClusterReader {
  private readonly nodes = new Map<string, NodeState>();
  private readonly clusters = new Map<string, ClusterState>();
  /** Written entries, with the node they are (null: an erased entry, known by its key only). */
  private readonly dirtyNodes = new Map<string, { scope: GraphScope; node: GraphNode | null }>();
  /** Of dirtyNodes, those whose store entry needs no rewrite (the batch changed only their last seen time). */
  private readonly unwritten = new Set<string>();
  /** last_seen_at of the node entries as read from the store: how old their last write is. */
  private readonly storedLast = new Map<string, number>();
  private readonly dirtyClusters = new Set<string>();
  /** Click ids by cluster (absent: none), the clusters whose click ids changed, and those with a stored ClickListState. */
  private readonly clickLists = new Map<string, MemberState[]>();
  private readonly dirtyClicks = new Set<string>();
  private readonly storedClicks = new Set<string>();
  /** Cluster ids looked up in the store (found or not). */
  private readonly askedClusters = new Set<string>();
  private readonly edges = new Map<string, EdgeRow>();
  private readonly merges: Array<{ from: string; into: string; scope: GraphScope }> = [];
  private readonly withdrawn = new Map<string, GraphScope>();
  private readonly erasedClusters: Array<{ id: string; scope: GraphScope }> = [];
  private readonly erasedNodes: Array<{ scope: GraphScope; nodeId: string }> = [];
  private newest = -Infinity;
  /** Store keys by scope and node: each is a SHA-256, computed once per batch. */
  private readonly keys = new Map<string, string>();
  private readonly keyOfNode = new WeakMap<GraphNode, { scope: GraphScope; key: string }>();

  private constructor(
    private readonly store: KeyValueStore<GraphEntry>,
    private readonly opts: GraphStateOptions,
  ) {}

  /**
   * Reads what a batch of events touches: their nodes' entries, the clusters those lead to (following merges), and the
   * cluster each event could found. An event founds at most one, named after the first of its merging nodes not in a
   * cluster when it links (cluster-plan.ts); that one is read because a cluster merged away since must not be founded
   * again under its id (foundable). A cluster's click list is read only when its summary says it has one. Each read is
   * a lookup in a store of the whole partition, most of them for keys that are not there.
   */
  static async load(store: KeyValueStore<GraphEntry>, events: readonly TouchedEvent[], opts: GraphStateOptions): Promise<GraphState> {
    const state = new GraphState(store, opts);
    const linked = events.map((e) => e.nodes.map((n) => state.keyOf(e.scope, n)));
    await state.read([...linked.flat(), ...events.flatMap((e) => (e.lookedUp ?? []).map((n) => state.keyOf(e.scope, n)))]);
    // In batch order: a node that an earlier event of the batch links is in a cluster by the time a later one links.
    const linkedBefore = new Set<string>();
    const founding: string[] = [];
    events.forEach((e, i) => {
      const keys = linked[i]!;
      const first = keys.find((k, j) => KIND_RULES[e.nodes[j]!.kind].merges && !linkedBefore.has(k) && !state.inCluster(k));
      if (first !== undefined) founding.push(foundedBy(first));
      for (const k of keys) linkedBefore.add(k);
    });
    await state.readClusters(founding);
    return state;
  }

  /** Reads node entries by key and the clusters they lead to (following merges). */
  private async read(nodeKeys: readonly string[]): Promise<GraphState> {
    const keys = [...new Set(nodeKeys)];
    if (keys.length === 0) return this;
    const found = await this.store.getMany(keys);
    // Copies: the batch changes its entries in place, and the store's committed values must not see that before commit.
    for (const [k, v] of found) {
      this.nodes.set(k, { ...(v as NodeState) });
      this.storedLast.set(k, (v as NodeState).last_seen_at);
    }
    await this.readClusters([...this.nodes.values()].map((n) => n.cluster));
    return this;
  }

  /** A node's entry leads to a cluster (absent: a new node; gone: its cluster was erased or aged out). */
  private inCluster(key: string): boolean {
    const n = this.nodes.get(key);
    return n !== undefined && this.root(n.cluster) !== undefined;
  }

  /** Reads cluster entries not read yet (and the click lists they have apart), then the clusters they were merged into. */
  private async readClusters(ids: readonly string[]): Promise<void> {
    const asked = this.askedClusters;
    let wanted = [...new Set(ids)].filter((id) => !asked.has(id));
    while (wanted.length > 0) {
      for (const id of wanted) asked.add(id);
      const got = await this.store.getMany(wanted.map(clusterStoreKey));
      const next: string[] = [];
      const apart: string[] = [];
      for (const id of wanted) {
        const stored = got.get(clusterStoreKey(id)) as ClusterState | undefined;
        if (!stored) continue;
        const { clicks: inline, clicks_apart: hasList, ...summary } = stored;
        const c: ClusterState = { ...summary, members: stored.members.map((m) => ({ ...m })), page_any: stored.page_any ?? stored.page_with_location };
        this.clusters.set(id, c);
        // Entries written before INLINE_CLICKS hold all of theirs inline: they move out on the cluster's next write.
        if (inline && inline.length > 0) this.clickLists.set(id, inline.map((m) => ({ ...m })));
        if (hasList !== false) apart.push(id);
        if (c.into !== null && !this.clusters.has(c.into) && !asked.has(c.into)) next.push(c.into);
      }
      if (apart.length > 0) {
        const lists = await this.store.getMany(apart.map(clickListStoreKey));
        for (const id of apart) {
          const list = lists.get(clickListStoreKey(id)) as ClickListState | undefined;
          if (!list) continue;
          this.storedClicks.add(id);
          this.clickLists.set(id, list.clicks.map((m) => ({ ...m })));
        }
      }
      wanted = [...new Set(next)];
    }
  }

  private keyOf(scope: GraphScope, n: GraphNode): string {
    // The same node object comes back for its event's load, link and withdrawal: its key is remembered on it.
    const known = this.keyOfNode.get(n);
    if (known !== undefined && known.scope === scope) return known.key;
    const k = `${scope.workspaceId}\n${scope.keyMode}\n${n.kind}\n${n.value}`;
    let key = this.keys.get(k);
    if (key === undefined) this.keys.set(k, (key = nodeStoreKey(scope, n)));
    this.keyOfNode.set(n, { scope, key });
    return key;
  }

  /** The cluster a node's entry leads to, or undefined when it is gone (erased, or aged out). */
  private root(clusterId: string): string | undefined {
    let id = clusterId;
    for (let hops = 0; hops < 64; hops++) {
      const c = this.clusters.get(id);
      if (!c) return undefined;
      if (c.into === null) return id;
      id = c.into;
    }
    throw new Error(`identity graph: cluster ${clusterId} forwards in a cycle`);
  }

  /** The node's cluster, when the node is in the graph. Organisations are their own singleton clusters. */
  private clusterOfNode(key: string, kind: GraphKind): string | undefined {
    const n = this.nodes.get(key);
    if (!n) return undefined;
    return KIND_RULES[kind].merges ? this.root(n.cluster) : n.cluster;
  }

  private clicksOf(clusterId: string): MemberState[] {
    return this.clickLists.get(clusterId) ?? [];
  }

  /** The cluster's click ids changed (callers touch the cluster too: its summary may hold them). */
  private setClicks(clusterId: string, clicks: MemberState[]): void {
    if (clicks.length > 0) this.clickLists.set(clusterId, clicks);
    else this.clickLists.delete(clusterId);
    this.dirtyClicks.add(clusterId);
  }

  private touchCluster(id: string): ClusterState {
    let c = this.clusters.get(id);
    if (!c) this.clusters.set(id, (c = emptyCluster()));
    this.dirtyClusters.add(id);
    return c;
  }

  /** Adds the event's nodes and links them (within the cap); stores its page data (pageHolders). One event's rules. */
  link(scope: GraphScope, nodes: readonly GraphNode[], seenAt: number, page: PageData | null): LinkResult {
    if (nodes.length === 0) return { refused: false, resolved: null };
    this.newest = Math.max(this.newest, seenAt);
    const keys = nodes.map((n) => this.keyOf(scope, n));
    // Each node's key in the plan (kind and value) once: the maps below are looked up by it several times.
    const planKeys = nodes.map(nodeKey);
    const existing = new Map<string, string>();
    nodes.forEach((n, i) => {
      const c = this.clusterOfNode(keys[i]!, n.kind);
      if (c !== undefined) existing.set(planKeys[i]!, c);
    });
    const stableCounts = new Map<string, number>();
    for (const c of new Set(existing.values())) stableCounts.set(c, this.clusters.get(c)?.members.length ?? 0);
    const plan = this.foundable(planCluster({ workspaceId: scope.workspaceId, keyMode: scope.keyMode, nodes, existing, stableCounts, cap: this.opts.maxClusterIdentifiers }), existing, seenAt);
    if (plan.merge) for (const from of plan.merge.from) this.fold(scope, from, plan.merge.into);

    const holders = page ? pageHolders(nodes, plan) : null;
    nodes.forEach((n, i) => {
      const key = keys[i]!;
      const own = holders?.has(n) ? page : null;
      const pageAt = own ? seenAt : null;
      const cluster = plan.clusterOf.get(planKeys[i]!)!;
      let s = existing.has(planKeys[i]!) ? this.nodes.get(key) : undefined;
      let rewrite = true;
      if (!s) {
        s = {
          cluster,
          first_seen_at: seenAt,
          last_seen_at: seenAt,
          page_location: own?.page_location ?? null,
          user_agent: own?.user_agent ?? null,
          page_seen_at: pageAt,
        };
        this.nodes.set(key, s);
      } else {
        const stored = this.storedLast.get(key);
        rewrite =
          !KIND_RULES[n.kind].stable || s.cluster !== cluster || seenAt < s.first_seen_at || pageAt !== null || stored === undefined || seenAt - stored >= NODE_REFRESH_MS;
        s.cluster = cluster;
        s.first_seen_at = Math.min(s.first_seen_at, seenAt);
        s.last_seen_at = Math.max(s.last_seen_at, seenAt);
        if (pageAt !== null && (s.page_seen_at === null || pageAt >= s.page_seen_at)) {
          s.page_location = own!.page_location ?? s.page_location;
          s.user_agent = own!.user_agent ?? s.user_agent;
        }
        if (pageAt !== null) s.page_seen_at = s.page_seen_at === null ? pageAt : Math.max(s.page_seen_at, pageAt);
      }
      if (rewrite) this.unwritten.delete(key);
      else if (!this.dirtyNodes.has(key)) this.unwritten.add(key);
      this.dirtyNodes.set(key, { scope, node: n });
      if (KIND_RULES[n.kind].merges) this.summarise(cluster, n, s);
    });
    if (plan.merge || existing.size < nodes.length) addEventEdges(this.edges, scope, nodes, plan, seenAt, existing);
    return { refused: plan.refused, resolved: plan.resolved };
  }

  /**
   * A plan that founds a cluster under the id of one merged away since (its entry forwards, and older entries may
   * still point at it) founds it under a derived id instead.
   */
  private foundable(plan: ClusterPlan, existing: ReadonlyMap<string, string>, seenAt: number): ClusterPlan {
    const known = new Set(existing.values());
    const renamed = new Map<string, string>();
    for (const id of plan.clusterOf.values()) {
      if (known.has(id) || renamed.has(id) || (this.clusters.get(id)?.into ?? null) === null) continue;
      let n = 0;
      let fresh: string;
      do fresh = `${id}.${seenAt.toString(36)}${n++ === 0 ? '' : `.${n}`}`;
      while (this.clusters.has(fresh));
      renamed.set(id, fresh);
    }
    if (renamed.size === 0) return plan;
    const to = (id: string) => renamed.get(id) ?? id;
    return {
      ...plan,
      clusterOf: new Map([...plan.clusterOf].map(([k, id]) => [k, to(id)])),
      resolved: plan.resolved === null ? null : to(plan.resolved),
    };
  }

  /** Keeps the cluster's summary in step with one of its nodes. */
  private summarise(clusterId: string, n: GraphNode, s: NodeState): void {
    const c = this.touchCluster(clusterId);
    if (KIND_RULES[n.kind].stable) upsertMember(c.members, n, s);
    if (n.kind === 'ttclid') {
      const clicks = this.clicksOf(clusterId);
      upsertMember(clicks, n, s);
      this.setClicks(clusterId, trimClicks(clicks, this.newest));
    }
    if (s.page_seen_at !== null) {
      const cand: PageCandidate = { kind: n.kind, value: n.value, page_location: s.page_location, user_agent: s.user_agent, page_seen_at: s.page_seen_at };
      // A node's page data only ever gets newer (and keeps a location once it has one), so the best stays a maximum.
      if (better(cand, c.page_any) || sameNode(cand, c.page_any)) c.page_any = cand;
      if (cand.page_location !== null && (better(cand, c.page_with_location) || sameNode(cand, c.page_with_location))) c.page_with_location = cand;
    }
  }

  /** Folds cluster `from` into `into`: `from` becomes a forward. */
  private fold(scope: GraphScope, from: string, into: string): void {
    const a = this.touchCluster(from);
    const b = this.touchCluster(into);
    b.members = [...b.members, ...a.members];
    if (this.clickLists.has(from) || this.clickLists.has(into)) {
      this.setClicks(into, trimClicks([...this.clicksOf(into), ...this.clicksOf(from)], this.newest));
      if (this.clickLists.has(from)) this.setClicks(from, []);
    }
    for (const p of [a.page_any, a.page_with_location]) {
      if (!p) continue;
      if (better(p, b.page_any)) b.page_any = p;
      if (p.page_location !== null && better(p, b.page_with_location)) b.page_with_location = p;
    }
    b.ad_storage_withdrawn_at = maxOrNull(b.ad_storage_withdrawn_at, a.ad_storage_withdrawn_at);
    b.ad_user_data_withdrawn_at = maxOrNull(b.ad_user_data_withdrawn_at, a.ad_user_data_withdrawn_at);
    Object.assign(a, emptyCluster(), { into });
    this.merges.push({ from, into, scope });
  }

  /** Consent withdrawal: marks the clusters the event's identifiers belong to (it adds nothing to them). */
  withdraw(scope: GraphScope, nodes: readonly GraphNode[], at: number, purposes: { readonly adStorage: boolean; readonly adUserData: boolean }): void {
    if (!purposes.adStorage && !purposes.adUserData) return;
    const clusters = new Set<string>();
    for (const n of nodes) {
      const c = this.clusterOfNode(this.keyOf(scope, n), n.kind);
      if (c !== undefined) clusters.add(c);
    }
    for (const id of clusters) {
      this.withdrawn.set(id, scope);
      const c = this.touchCluster(id);
      if (purposes.adStorage) c.ad_storage_withdrawn_at = Math.max(c.ad_storage_withdrawn_at ?? at, at);
      if (purposes.adUserData) c.ad_user_data_withdrawn_at = Math.max(c.ad_user_data_withdrawn_at ?? at, at);
    }
  }

  /** Reads what an erasure record names: identifier entries by key, and the clusters they lead to. */
  static async loadKeys(store: KeyValueStore<GraphEntry>, nodeKeys: readonly string[], opts: GraphStateOptions): Promise<GraphState> {
    return new GraphState(store, opts).read(nodeKeys);
  }

  /**
   * Erasure: the clusters of the given identifier entries go (their stable identifiers' and click ids' entries with
   * them), and so do the given entries. Ephemeral entries left pointing at an erased cluster count as absent until
   * they age out. Organisations are shared by many people by design: they stay. Returns the clusters erased.
   */
  erase(scope: GraphScope, nodeKeys: readonly string[]): number {
    const ids = new Set<string>();
    const gone = new Set<string>();
    for (const key of nodeKeys) {
      const kind = kindOfKey(key);
      if (kind === undefined || kind === 'organization') continue;
      gone.add(key);
      const c = KIND_RULES[kind].merges ? this.clusterOfNode(key, kind) : undefined;
      if (c !== undefined) ids.add(c);
    }
    for (const id of ids) {
      const c = this.clusters.get(id)!;
      for (const m of [...c.members, ...this.clicksOf(id)]) gone.add(this.keyOf(scope, m));
      this.clusters.delete(id);
      this.dirtyClusters.add(id);
      this.setClicks(id, []);
      this.erasedClusters.push({ id, scope });
    }
    for (const key of gone) {
      this.nodes.delete(key);
      this.unwritten.delete(key);
      this.dirtyNodes.set(key, { scope, node: null });
      this.erasedNodes.push({ scope, nodeId: nodeIdOfKey(key) });
    }
    return ids.size;
  }

  // ---- reads (ClusterReader) -------------------------------------------------------------------------------------

  private summary(clusterId: string): ClusterState | undefined {
    const root = this.root(clusterId);
    return root === undefined ? undefined : this.clusters.get(root);
  }

  private static since(c: ClusterState, kind: GraphKind): number {
    const storage = c.ad_storage_withdrawn_at ?? -Infinity;
    return KIND_RULES[kind].personal ? Math.max(storage, c.ad_user_data_withdrawn_at ?? -Infinity) : storage;
  }

  identifiers(clusterId: string, kinds: readonly GraphKind[], perKind: number): GraphNode[] {
    return this.offeredIdentifiers(clusterId, kinds, perKind).map((n) => ({ kind: n.kind, value: n.value }));
  }

  offeredIdentifiers(clusterId: string, kinds: readonly GraphKind[], perKind: number): OfferedNode[] {
    for (const k of kinds) if (!KIND_RULES[k].stable) throw new Error(`identity graph: ${k} is not kept in a cluster's summary`);
    const c = this.summary(clusterId);
    if (!c) return [];
    return newestPerKind(c.members.filter((m) => kinds.includes(m.kind) && m.last_seen_at > GraphState.since(c, m.kind)), perKind);
  }

  newestClickId(clusterId: string, at: number, windowMs: number): string | undefined {
    const root = this.root(clusterId);
    if (root === undefined) return undefined;
    const c = this.clusters.get(root)!;
    const since = GraphState.since(c, 'ttclid');
    let best: MemberState | undefined;
    for (const m of this.clicksOf(root)) {
      if (m.first_seen_at <= at - windowMs || m.first_seen_at > at || m.last_seen_at <= since) continue;
      if (!best || m.first_seen_at > best.first_seen_at || (m.first_seen_at === best.first_seen_at && byValue(m, best) < 0)) best = m;
    }
    return best?.value;
  }

  newestPageData(clusterId: string): PageData | undefined {
    const c = this.summary(clusterId);
    if (!c) return undefined;
    const storage = c.ad_storage_withdrawn_at ?? -Infinity;
    // The newest with a location wins; when even that one is older than a withdrawal, no node with a location is
    // offered, and the newest of all (then one without a location) is the answer if it is offered.
    for (const p of [c.page_with_location, c.page_any]) {
      if (p && p.page_seen_at > storage) return { page_location: p.page_location, user_agent: p.user_agent };
    }
    return undefined;
  }

  // ---- write back ------------------------------------------------------------------------------------------------

  /** Writes the batch's entries to the store and returns its changes for the queryable tables, one per graph. */
  async save(): Promise<GraphChanges[]> {
    for (const [key] of this.dirtyNodes) {
      if (this.unwritten.has(key)) continue;
      const s = this.nodes.get(key);
      if (s) await this.store.put(key, s);
      else this.store.delete(key);
    }
    const retention = this.opts.retentionMs;
    for (const id of this.dirtyClusters) {
      const c = this.clusters.get(id);
      if (!c) {
        this.store.delete(clusterStoreKey(id));
        continue;
      }
      if (retention !== undefined && c.into === null) c.members = c.members.filter((m) => m.last_seen_at > this.newest - retention);
      const clicks = this.clicksOf(id);
      const stored = { ...c, page_any: samePage(c.page_any, c.page_with_location) ? null : c.page_any, clicks_apart: clicks.length > INLINE_CLICKS };
      await this.store.put(clusterStoreKey(id), clicks.length > 0 && clicks.length <= INLINE_CLICKS ? { ...stored, clicks } : stored);
    }
    // Every cluster whose click ids changed was touched too (setClicks' callers).
    for (const id of this.dirtyClusters) {
      const own = this.clusters.has(id) && this.clicksOf(id).length > INLINE_CLICKS;
      if (own && (this.dirtyClicks.has(id) || !this.storedClicks.has(id))) await this.store.put(clickListStoreKey(id), { clicks: this.clicksOf(id) });
      else if (!own && this.storedClicks.has(id)) this.store.delete(clickListStoreKey(id));
    }
    return this.changes();
  }

  private changes(): GraphChanges[] {
    const byGraph = new Map<string, { scope: GraphScope; merges: GraphChanges['merges'][number][]; nodes: NodeRow[]; sightings: NodeSighting[]; edges: EdgeRow[]; withdrawals: GraphChanges['withdrawals'][number][]; erased_clusters: string[]; erased_node_ids: string[] }>();
    const of = (scope: GraphScope) => {
      const k = `${scope.workspaceId}\n${scope.keyMode}`;
      let g = byGraph.get(k);
      if (!g) byGraph.set(k, (g = { scope, merges: [], nodes: [], sightings: [], edges: [], withdrawals: [], erased_clusters: [], erased_node_ids: [] }));
      return g;
    };
    for (const m of this.merges) of(m.scope).merges.push({ from: m.from, into: m.into });
    for (const [key, t] of this.dirtyNodes) {
      const s = this.nodes.get(key);
      if (!s || !t.node) continue;
      // Its cluster, first sighting and page data are as the row has them: only the time moves (the member's, see link).
      if (this.unwritten.has(key)) {
        of(t.scope).sightings.push({ node_id: nodeIdOfKey(key), last_seen_at: s.last_seen_at });
        continue;
      }
      const cluster = (KIND_RULES[t.node.kind].merges ? this.root(s.cluster) : s.cluster) ?? s.cluster;
      const c = this.clusters.get(cluster);
      of(t.scope).nodes.push({
        node_id: nodeIdOfKey(key),
        workspace_id: t.scope.workspaceId,
        key_mode: t.scope.keyMode,
        kind: t.node.kind,
        value: t.node.value,
        cluster_id: cluster,
        first_seen_at: s.first_seen_at,
        last_seen_at: s.last_seen_at,
        page_location: s.page_location,
        user_agent: s.user_agent,
        page_seen_at: s.page_seen_at,
        ad_user_data_withdrawn_at: c?.ad_user_data_withdrawn_at ?? null,
        ad_storage_withdrawn_at: c?.ad_storage_withdrawn_at ?? null,
      });
    }
    for (const e of this.edges.values()) of({ workspaceId: e.workspace_id, keyMode: e.key_mode }).edges.push(e);
    for (const [id, scope] of this.withdrawn) {
      const root = this.root(id) ?? id;
      const c = this.clusters.get(root);
      if (c) of(scope).withdrawals.push({ cluster_id: root, ad_storage_withdrawn_at: c.ad_storage_withdrawn_at, ad_user_data_withdrawn_at: c.ad_user_data_withdrawn_at });
    }
    for (const e of this.erasedClusters) of(e.scope).erased_clusters.push(e.id);
    for (const e of this.erasedNodes) of(e.scope).erased_node_ids.push(e.nodeId);
    return [...byGraph.values()].map((g) => ({
      workspace_id: g.scope.workspaceId,
      key_mode: g.scope.keyMode,
      merges: g.merges,
      nodes: g.nodes,
      sightings: g.sightings,
      edges: g.edges,
      withdrawals: g.withdrawals,
      erased_clusters: g.erased_clusters,
      erased_node_ids: g.erased_node_ids,
    }));
  }
}

const sameNode = (a: { kind: string; value: string }, b: { kind: string; value: string } | null): boolean => b !== null && a.kind === b.kind && a.value === b.value;
const samePage = (a: PageCandidate | null, b: PageCandidate | null): boolean =>
  a === b ||
  (a !== null && b !== null && sameNode(a, b) && a.page_location === b.page_location && a.user_agent === b.user_agent && a.page_seen_at === b.page_seen_at);

/** The member's times span the node's (whose last_seen_at may lag in the store: NODE_REFRESH_MS), and the node takes them. */
function upsertMember(list: MemberState[], n: GraphNode, s: NodeState): void {
  const m = list.find((x) => x.kind === n.kind && x.value === n.value);
  if (m) {
    m.first_seen_at = Math.min(m.first_seen_at, s.first_seen_at);
    m.last_seen_at = Math.max(m.last_seen_at, s.last_seen_at);
    s.first_seen_at = m.first_seen_at;
    s.last_seen_at = m.last_seen_at;
  } else list.push({ kind: n.kind, value: n.value, first_seen_at: s.first_seen_at, last_seen_at: s.last_seen_at });
}

/** The newest MAX_CLICKS click ids by first seen, none first seen before the longest click window. */
function trimClicks(clicks: MemberState[], newest: number): MemberState[] {
  const kept = clicks.filter((m) => m.first_seen_at > newest - MAX_CLICK_WINDOW_MS);
  if (kept.length <= MAX_CLICKS) return kept;
  return kept.sort((a, b) => b.first_seen_at - a.first_seen_at || byValue(a, b)).slice(0, MAX_CLICKS);
}
