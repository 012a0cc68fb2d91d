/**
 * The partition-local graph (graph-state.ts) against the whole-cluster model it replaces (GraphSnapshot over every
 * node of the graph): on seeded streams of events (merges, cap refusals, page data, click ids, consent withdrawals,
 * times out of order, both key modes), run in batches through a store, every read after every event and the rows
 * the graph sink builds must equal the reference's.
 */
import { describe, expect, it } from 'vitest';
import { prng } from '../../../test/helpers/prng.js';
import { PartitionStore, StoreTransaction } from '../../stream/store.js';
import { GraphSnapshot, nodeIdOf, type EdgeRow, type GraphScope, type NodeRow } from './graph-repo.js';
import { EPHEMERAL_RETENTION, GraphState, INLINE_CLICKS, MAX_CLICKS, NODE_REFRESH_MS, clickListStoreKey, clusterStoreKey, nodeStoreKey, type ClickListState, type ClusterState, type GraphChanges, type GraphEntry } from './graph-state.js';
import { kindPriority, type GraphKind, type GraphNode } from './kinds.js';
import { clusterIdFor } from './cluster-plan.js';
import type { KeyValueStore } from '../../stream/store.js';

const DAY = 24 * 3600_000;
const T0 = Date.UTC(2026, 10, 1);
const PERSONAL: GraphKind[] = ['email_sha256', 'email_canonical_sha256', 'phone_e164_sha256', 'user_id'];

interface GraphEvent {
  readonly scope: GraphScope;
  readonly nodes: GraphNode[];
  readonly at: number;
  readonly page: { page_location: string | null; user_agent: string | null } | null;
  readonly withdraw: { adStorage: boolean; adUserData: boolean } | null;
}

function stream(seed: number, n: number): GraphEvent[] {
  const r = prng(seed);
  const pick = (k: number) => Math.floor(r() * k);
  const out: GraphEvent[] = [];
  let at = T0;
  for (let i = 0; i < n; i++) {
    at += pick(3) * 3600_000;
    const nodes = new Map<string, GraphNode>();
    const add = (kind: GraphKind, value: string) => nodes.set(`${kind}:${value}`, { kind, value });
    if (r() < 0.4) add('user_id', `u${pick(14)}`);
    if (r() < 0.4) add('email_sha256', `e${pick(18)}`);
    if (r() < 0.15) add('phone_e164_sha256', `p${pick(9)}`);
    if (r() < 0.7) add('client_id', `c${pick(30)}`);
    if (r() < 0.6) add('session_id', `s${pick(60)}`);
    if (r() < 0.25) add('ttclid', `t${pick(40)}`);
    if (r() < 0.05) add('organization', `o${pick(3)}`);
    const page = r() < 0.5 ? { page_location: r() < 0.6 ? `https://shop.example/${pick(5)}` : null, user_agent: r() < 0.8 ? `agent-${pick(3)}` : null } : null;
    const w = r();
    out.push({
      scope: { workspaceId: 'ws_state', keyMode: r() < 0.9 ? 'live' : 'test' },
      nodes: [...nodes.values()].sort((a, b) => kindPriority(a.kind) - kindPriority(b.kind) || (a.value < b.value ? -1 : 1)),
      // Some events arrive late: their receive time is before the newest seen.
      at: r() < 0.1 ? at - pick(48) * 3600_000 : at,
      page: page && (page.page_location || page.user_agent) ? page : null,
      withdraw: w < 0.04 ? { adStorage: true, adUserData: false } : w < 0.08 ? { adStorage: false, adUserData: true } : null,
    });
  }
  return out;
}

/** The reads a conversion makes of its cluster, from either model. */
function reads(g: GraphSnapshot | GraphState, cluster: string | null, at: number) {
  if (cluster === null) return null;
  return {
    personal: g.offeredIdentifiers(cluster, PERSONAL, 5),
    click: g.newestClickId(cluster, at, 7 * DAY),
    page: g.newestPageData(cluster) ?? null,
  };
}

/** The store a partition keeps, committed batch by batch as the Kafka runtime does. */
function partition() {
  const store = new PartitionStore<GraphEntry>({ ms: 180 * DAY, byPrefix: EPHEMERAL_RETENTION });
  return {
    store,
    async batch<T>(fn: (tx: StoreTransaction<GraphEntry>) => Promise<T>): Promise<T> {
      const tx = store.begin();
      const out = await fn(tx);
      store.apply(tx, T0);
      return out;
    },
  };
}

const n = (kind: GraphKind, value: string): GraphNode => ({ kind, value });

/** Batches of one event each on the partition: load its nodes, run `fn`, save; what `fn` answered and the keys written. */
function eventBatches(p: ReturnType<typeof partition>, scope: GraphScope) {
  return <T>(nodes: GraphNode[], fn: (s: GraphState) => T) =>
    p.batch(async (tx) => {
      const s = await GraphState.load(tx, [{ scope, nodes }], { maxClusterIdentifiers: 100 });
      const out = fn(s);
      await s.save();
      return { out, written: [...tx.changes()].map(([k]) => k) };
    });
}

/** The queryable tables as the graph sink leaves them (graph-sink.ts applyChanges, in memory). */
function tables() {
  const nodes = new Map<string, NodeRow>();
  const edges = new Map<string, EdgeRow>();
  return {
    nodes,
    edges,
    apply(c: GraphChanges) {
      for (const m of c.merges) for (const row of nodes.values()) if (row.cluster_id === m.from) row.cluster_id = m.into;
      for (const row of c.nodes) nodes.set(row.node_id, { ...row });
      for (const s of c.sightings) {
        const row = nodes.get(s.node_id);
        if (row) row.last_seen_at = Math.max(row.last_seen_at, s.last_seen_at);
      }
      for (const e of c.edges) {
        const k = `${e.workspace_id}|${e.key_mode}|${e.a_kind}|${e.a_value}|${e.b_kind}|${e.b_value}`;
        const prior = edges.get(k);
        edges.set(k, prior ? { ...e, first_seen_at: Math.min(prior.first_seen_at, e.first_seen_at), last_seen_at: Math.max(prior.last_seen_at, e.last_seen_at) } : { ...e });
      }
    },
  };
}

const comparable = (rows: Iterable<NodeRow>) =>
  [...rows]
    .map(({ ad_storage_withdrawn_at: _s, ad_user_data_withdrawn_at: _u, ...row }) => row)
    .sort((a, b) => (a.node_id < b.node_id ? -1 : 1));

describe('identity graph as partition-local state', () => {
  it.each([
    { seed: 3, events: 600, batch: 1, cap: 100 },
    { seed: 7, events: 1500, batch: 50, cap: 100 },
    { seed: 13, events: 1500, batch: 350, cap: 6 },
    { seed: 21, events: 2500, batch: 97, cap: 4 },
  ])('seed $seed, batches of $batch, cap $cap: the same reads and tables as the whole-cluster model', async ({ seed, events, batch, cap }) => {
    const evs = stream(seed, events);
    const reference = new GraphSnapshot({ maxClusterIdentifiers: cap });
    const p = partition();
    const t = tables();
    for (let i = 0; i < evs.length; i += batch) {
      const slice = evs.slice(i, i + batch);
      await p.batch(async (tx) => {
        const state = await GraphState.load(tx, slice.map((e) => ({ scope: e.scope, nodes: e.nodes })), { maxClusterIdentifiers: cap });
        for (const e of slice) {
          const expected = reference.link(e.scope, e.nodes, e.at, e.page);
          const got = state.link(e.scope, e.nodes, e.at, e.page);
          expect(got).toEqual(expected);
          if (e.withdraw) {
            reference.withdraw(e.scope, e.nodes, e.at, e.withdraw);
            state.withdraw(e.scope, e.nodes, e.at, e.withdraw);
          }
          expect(reads(state, got.resolved, e.at)).toEqual(reads(reference, expected.resolved, e.at));
        }
        for (const c of await state.save()) t.apply(c);
      });
    }
    const { nodes, edges } = reference.changes();
    expect(comparable(t.nodes.values())).toEqual(comparable(nodes));
    expect([...t.edges.values()].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))).toEqual(
      [...edges].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
    );
  });

  it('reads and writes only what an event touches: the entries per event do not grow with the history', async () => {
    const p = partition();
    const scope: GraphScope = { workspaceId: 'ws_loyal', keyMode: 'live' };
    const sizes: number[] = [];
    let cluster = '';
    for (let visit = 0; visit < 400; visit++) {
      const nodes: GraphNode[] = [
        { kind: 'email_sha256', value: 'loyal' },
        { kind: 'client_id', value: 'c1' },
        { kind: 'session_id', value: `s${visit}` },
        { kind: 'ttclid', value: `t${visit}` },
      ];
      const written = await p.batch(async (tx) => {
        const state = await GraphState.load(tx, [{ scope, nodes }], { maxClusterIdentifiers: 100 });
        cluster = state.link(scope, nodes, T0 + visit * 3600_000, { page_location: `https://shop.example/${visit}`, user_agent: 'agent' }).resolved!;
        await state.save();
        return [...tx.changes()];
      });
      sizes.push(JSON.stringify(written).length);
    }
    // Four identifier entries, one cluster summary and its click list each time; the list holds at most MAX_CLICKS.
    expect(sizes.at(-1)!).toBeLessThanOrEqual(sizes[MAX_CLICKS + 1]! + 64);
    const summary = p.store.read(clusterStoreKey(cluster)) as ClusterState;
    expect(summary.members.map((m) => m.kind).sort()).toEqual(['client_id', 'email_sha256']);
    const { clicks } = p.store.read(clickListStoreKey(cluster)) as ClickListState;
    expect(clicks).toHaveLength(MAX_CLICKS);
    expect(clicks[0]!.value).toBe('t399');
    expect(summary.page_with_location?.page_location).toBe('https://shop.example/399');
  });

  it("reads the one cluster an event could found, and a cluster's click list only when the cluster has one apart", async () => {
    const p = partition();
    const scope: GraphScope = { workspaceId: 'ws_reads', keyMode: 'live' };
    /** Links the nodes in one batch and answers the keys the batch looked up in the store. */
    const link = (at: number, ...nodes: GraphNode[]) =>
      p.batch(async (tx) => {
        const asked: string[] = [];
        const counting: KeyValueStore<GraphEntry> = {
          get: (key) => (asked.push(key), tx.get(key)),
          getMany: (keys) => (asked.push(...keys), tx.getMany(keys)),
          put: (key, value) => tx.put(key, value),
          delete: (key) => tx.delete(key),
        };
        const s = await GraphState.load(counting, [{ scope, nodes }], { maxClusterIdentifiers: 100 });
        const resolved = s.link(scope, nodes, at, null).resolved!;
        await s.save();
        return { resolved, asked: [...asked].sort() };
      });
    const key = (node: GraphNode) => nodeStoreKey(scope, node);
    const founds = (node: GraphNode) => clusterStoreKey(clusterIdFor(scope.workspaceId, scope.keyMode, node));

    const person = [n('email_sha256', 'e1'), n('client_id', 'c1'), n('ttclid', 't1')];
    const first = await link(T0, ...person);
    // All new: the first founds the cluster (the event founds one at most), so its id is looked up, not the others'.
    expect(first.asked).toEqual([...person.map(key), founds(person[0]!)].sort());
    // Known identifiers and a new session: their cluster, and only the session's own id beside it.
    const session = n('session_id', 's1');
    const again = await link(T0 + 1000, ...person, session);
    expect(again.resolved).toBe(first.resolved);
    expect(again.asked).toEqual([...person, session].map(key).concat(clusterStoreKey(first.resolved), founds(session)).sort());
    // Past INLINE_CLICKS its click ids are apart, and a read then looks for them.
    for (let i = 2; i <= INLINE_CLICKS + 1; i++) await link(T0 + i * 1000, n('client_id', 'c1'), n('ttclid', `t${i}`));
    const apart = await link(T0 + 9000, n('client_id', 'c1'));
    expect(apart.asked).toEqual([key(n('client_id', 'c1')), clusterStoreKey(first.resolved), clickListStoreKey(first.resolved)].sort());
  });

  it('a known identifier whose cluster is gone founds again, never under the id of a cluster merged away', async () => {
    const p = partition();
    const scope: GraphScope = { workspaceId: 'ws_orphan', keyMode: 'live' };
    const run = eventBatches(p, scope);
    const link = async (at: number, ...nodes: GraphNode[]) => (await run(nodes, (s) => s.link(scope, nodes, at, null).resolved!)).out;
    const s2 = n('session_id', 's2');
    // s2 founds its cluster, which is then merged into e1's: s2's entry now points at e1's cluster.
    const own = await link(T0, s2);
    const person = await link(T0 + 1, n('email_sha256', 'e1'), n('client_id', 'c1'));
    expect(await link(T0 + 2, n('email_sha256', 'e1'), s2)).toBe(person);
    expect((p.store.read(clusterStoreKey(own)) as ClusterState).into).toBe(person);
    expect((p.store.read(nodeStoreKey(scope, s2)) as { cluster: string }).cluster).toBe(person);
    // e1's cluster is erased; s2's entry stays (sessions age out) and leads nowhere.
    await run([n('email_sha256', 'e1')], (s) => s.erase(scope, [nodeStoreKey(scope, n('email_sha256', 'e1'))]));
    expect(p.store.read(nodeStoreKey(scope, s2))).toBeDefined();
    // s2 comes back: it founds a cluster, not the one it founded first (merged away: older entries may lead to it).
    const refounded = await link(T0 + DAY, s2);
    expect(refounded).not.toBe(own);
    expect(refounded).not.toBe(person);
  });

  it('an event that founds with a later identifier, after an earlier event of its batch linked its first, does not reuse a merged-away id', async () => {
    const p = partition();
    const scope: GraphScope = { workspaceId: 'ws_batchfound', keyMode: 'live' };
    const batch = (cap: number, events: GraphNode[][]) =>
      p.batch(async (tx) => {
        const s = await GraphState.load(tx, events.map((nodes) => ({ scope, nodes })), { maxClusterIdentifiers: cap });
        const resolved = events.map((nodes, i) => s.link(scope, nodes, T0 + i, null).resolved);
        await s.save();
        return resolved;
      });
    const [y, z, w, x] = [n('user_id', 'y'), n('email_sha256', 'z'), n('client_id', 'w'), n('user_id', 'x')];
    // y founds its cluster, which is merged into z's (the larger); z's person is then erased: y's first cluster stays
    // a forward into nothing.
    const [own] = await batch(100, [[y]]);
    await batch(100, [[z, w]]);
    await batch(100, [[y, z]]);
    expect((p.store.read(clusterStoreKey(own!)) as ClusterState).into).not.toBeNull();
    await p.batch(async (tx) => {
      const s = await GraphState.loadKeys(tx, [nodeStoreKey(scope, z)], { maxClusterIdentifiers: 100 });
      s.erase(scope, [nodeStoreKey(scope, z)]);
      await s.save();
    });
    expect(p.store.read(nodeStoreKey(scope, y))).toBeUndefined();
    // One batch, cap 1: x founds its cluster; then x and y, which the cap refuses to link, so y founds one of its own.
    await batch(1, [[x], [x, y]]);
    const cluster = (p.store.read(nodeStoreKey(scope, y)) as { cluster: string }).cluster;
    expect(cluster).not.toBe(own);
    expect(cluster).not.toBe((p.store.read(nodeStoreKey(scope, x)) as { cluster: string }).cluster);
  });

  it("a cluster's click ids: in its summary while few, then in an entry written only when they change; merged, erased and read from older entries", async () => {
    const p = partition();
    const scope: GraphScope = { workspaceId: 'ws_clicks', keyMode: 'live' };
    const run = eventBatches(p, scope);
    const link = (at: number, ...nodes: GraphNode[]) => run(nodes, (s) => s.link(scope, nodes, at, null).resolved!);
    const clickOf = (cluster: string, at: number, node: GraphNode) => run([node], (s) => s.newestClickId(cluster, at, 7 * DAY));
    const summary = (cluster: string) => p.store.read(clusterStoreKey(cluster)) as ClusterState;
    const list = (cluster: string) => (p.store.read(clickListStoreKey(cluster)) as ClickListState | undefined)?.clicks.map((m) => m.value).sort();

    let a = '';
    for (let i = 1; i <= INLINE_CLICKS; i++) {
      const r = await link(T0 + i * 1000, n('client_id', 'c1'), n('ttclid', `t${i}`));
      a = r.out;
      expect(r.written).not.toContain(clickListStoreKey(a));
    }
    expect(summary(a).clicks!.map((m) => m.value)).toHaveLength(INLINE_CLICKS);
    // One more: they move to an entry of their own, and the summary no longer holds them.
    const moved = await link(T0 + 5000, n('client_id', 'c1'), n('ttclid', 't5'));
    expect(moved.written).toEqual(expect.arrayContaining([clusterStoreKey(a), clickListStoreKey(a)]));
    expect(summary(a).clicks).toBeUndefined();
    expect(list(a)).toEqual(['t1', 't2', 't3', 't4', 't5']);
    // Seen again without a click id: the summary is written, the click ids are not.
    const again = await link(T0 + 6000, n('client_id', 'c1'));
    expect(again.written).toContain(clusterStoreKey(a));
    expect(again.written).not.toContain(clickListStoreKey(a));
    expect((await clickOf(a, T0 + 6500, n('client_id', 'c1'))).out).toBe('t5');
    expect((await clickOf(a, T0 + 2500, n('client_id', 'c1'))).out).toBe('t2');
    // Its summary says the click ids are apart; one written before it said so is read with them too.
    expect(summary(a).clicks_apart).toBe(true);
    const { clicks_apart: _apart, ...unmarked } = summary(a);
    const mark = p.store.begin();
    await mark.put(clusterStoreKey(a), unmarked);
    p.store.apply(mark, T0);
    expect((await clickOf(a, T0 + 6500, n('client_id', 'c1'))).out).toBe('t5');

    // A second person with a newer click (inline), merged with the first by an email both share: one list of six.
    const b = (await link(T0 + 7000, n('client_id', 'c2'), n('ttclid', 't6'))).out;
    const merged = await link(T0 + 8000, n('email_sha256', 'e1'), n('client_id', 'c1'), n('client_id', 'c2'));
    const into = merged.out;
    const from = into === a ? b : a;
    expect(summary(from).into).toBe(into);
    expect(list(from)).toBeUndefined();
    expect(summary(into).clicks).toBeUndefined();
    expect(list(into)).toEqual(['t1', 't2', 't3', 't4', 't5', 't6']);
    expect((await clickOf(into, T0 + 9000, n('client_id', 'c1'))).out).toBe('t6');
    expect((await clickOf(into, T0 + 3500, n('client_id', 'c2'))).out).toBe('t3');

    // An erasure takes the click ids (their own entries and the list) with the cluster.
    const erased = await run([n('email_sha256', 'e1')], (s) => s.erase(scope, [nodeStoreKey(scope, n('email_sha256', 'e1'))]));
    expect(erased.written).toEqual(expect.arrayContaining([clickListStoreKey(into), nodeStoreKey(scope, n('ttclid', 't1')), nodeStoreKey(scope, n('ttclid', 't6'))]));
    expect(list(into)).toBeUndefined();

    // A summary written before INLINE_CLICKS holds all its click ids itself: they are read, and move out on its next write.
    const old = (await link(T0 + DAY, n('client_id', 'c9'), ...['t91', 't92', 't93', 't94', 't95', 't96'].map((v) => n('ttclid', v)))).out;
    const tx = p.store.begin();
    await tx.put(clusterStoreKey(old), { ...summary(old), clicks: (p.store.read(clickListStoreKey(old)) as ClickListState).clicks });
    tx.delete(clickListStoreKey(old));
    p.store.apply(tx, T0);
    expect((await clickOf(old, T0 + DAY + 1000, n('client_id', 'c9'))).out).toBe('t91');
    const rewritten = await link(T0 + DAY + 2000, n('client_id', 'c9'));
    expect(rewritten.written).toEqual(expect.arrayContaining([clusterStoreKey(old), clickListStoreKey(old)]));
    expect(summary(old).clicks).toBeUndefined();
    expect(list(old)).toHaveLength(6);
  });

  it("stores a cluster's best page data once when the best of all is the best with a location, and reads both back", async () => {
    const p = partition();
    const scope: GraphScope = { workspaceId: 'ws_pages', keyMode: 'live' };
    const c1: GraphNode = { kind: 'client_id', value: 'c1' };
    const u1: GraphNode = { kind: 'user_id', value: 'u1' };
    const visit = (at: number, nodes: GraphNode[], page: { page_location: string | null; user_agent: string | null } | null) =>
      p.batch(async (tx) => {
        const s = await GraphState.load(tx, [{ scope, nodes }], { maxClusterIdentifiers: 100 });
        const { resolved } = s.link(scope, nodes, at, page);
        await s.save();
        return resolved!;
      });
    const read = (cluster: string) =>
      p.batch(async (tx) => {
        const s = await GraphState.load(tx, [{ scope, nodes: [], lookedUp: [c1] }], { maxClusterIdentifiers: 100 });
        return s.newestPageData(cluster);
      });
    const stored = (cluster: string) => p.store.read(clusterStoreKey(cluster)) as ClusterState;
    const cluster = await visit(T0, [c1, u1], { page_location: 'https://shop.example/a', user_agent: 'agent-1' });
    expect([stored(cluster).page_with_location?.page_location, stored(cluster).page_any]).toEqual(['https://shop.example/a', null]);
    expect(await read(cluster)).toEqual({ page_location: 'https://shop.example/a', user_agent: 'agent-1' });
    // An email joins without page data, then comes back with older page data and no location: the best of all is
    // still the best with a location (the store's null is read back as it), so it stays stored once.
    const e1: GraphNode = { kind: 'email_sha256', value: 'e1' };
    await visit(T0 + 10, [u1, e1], null);
    await visit(T0 - 500, [e1], { page_location: null, user_agent: 'agent-0' });
    expect(stored(cluster).page_any).toBeNull();
    // Later page data without a location (kept by u1, the first of its event's nodes, then by u2 alone): now the best
    // of all differs from the best with a location, and both are kept. The answer is the location's own visit.
    await visit(T0 + 1000, [{ kind: 'user_id', value: 'u2' }, u1], { page_location: null, user_agent: 'agent-2' });
    await visit(T0 + 2000, [{ kind: 'user_id', value: 'u2' }], { page_location: null, user_agent: 'agent-3' });
    expect([stored(cluster).page_with_location?.value, stored(cluster).page_any?.value]).toEqual(['c1', 'u2']);
    expect(await read(cluster)).toEqual({ page_location: 'https://shop.example/a', user_agent: 'agent-1' });
    // Newer page data with a location: one candidate again, stored once.
    await visit(T0 + 3000, [c1], { page_location: 'https://shop.example/b', user_agent: 'agent-4' });
    expect(stored(cluster).page_any).toBeNull();
    expect(await read(cluster)).toEqual({ page_location: 'https://shop.example/b', user_agent: 'agent-4' });
  });

  it("a web event's page data is kept by one node in each of its clusters: a returning visitor's other identifiers are not rewritten", async () => {
    const p = partition();
    const scope: GraphScope = { workspaceId: 'ws_holder', keyMode: 'live' };
    const t = tables();
    const visit = (at: number, nodes: GraphNode[], page: { page_location: string; user_agent: string } | null, cap = 100) =>
      p.batch(async (tx) => {
        const s = await GraphState.load(tx, [{ scope, nodes }], { maxClusterIdentifiers: cap });
        const { resolved, refused } = s.link(scope, nodes, at, page);
        for (const c of await s.save()) t.apply(c);
        return { resolved: resolved!, refused, written: [...tx.changes()].map(([k]) => k) };
      });
    const page = (i: number) => ({ page_location: `https://shop.example/${i}`, user_agent: `agent-${i}` });
    const person = [n('user_id', 'u1'), n('email_sha256', 'e1'), n('client_id', 'c1')];
    const first = await visit(T0, person, page(1));
    expect(first.written).toEqual(expect.arrayContaining(person.map((m) => nodeStoreKey(scope, m))));
    // Ten minutes later, another page: the client id (first by kind) takes it; the user id and the email are not rewritten.
    const again = await visit(T0 + 600_000, person, page(2));
    expect(again.written).toContain(nodeStoreKey(scope, n('client_id', 'c1')));
    expect(again.written).not.toContain(nodeStoreKey(scope, n('user_id', 'u1')));
    expect(again.written).not.toContain(nodeStoreKey(scope, n('email_sha256', 'e1')));
    const row = (m: GraphNode) => t.nodes.get(nodeIdOf(scope, m))!;
    expect([row(person[2]!).page_location, row(person[0]!).page_location, row(person[1]!).page_location]).toEqual([page(2).page_location, null, null]);
    expect(row(person[0]!).last_seen_at).toBe(T0 + 600_000);
    // A link the cap refuses leaves the event's nodes in two clusters: each keeps the page data by its own first node.
    const other = (await visit(T0 + 1000, [n('user_id', 'u2')], null)).resolved;
    const split = await visit(T0 + 700_000, [n('user_id', 'u2'), n('client_id', 'c1')], page(3), 3);
    expect(split.refused).toBe(true);
    expect([row(n('user_id', 'u2')).page_location, row(person[2]!).page_location]).toEqual([page(3).page_location, page(3).page_location]);
    const read = (cluster: string) =>
      p.batch(async (tx) => (await GraphState.load(tx, [{ scope, nodes: [], lookedUp: [person[2]!, n('user_id', 'u2')] }], { maxClusterIdentifiers: 3 })).newestPageData(cluster));
    expect(await read(other)).toEqual(page(3));
    expect(await read(first.resolved)).toEqual(page(3));
  });

  it('a stable identifier seen again with nothing else new is not rewritten within NODE_REFRESH_MS; its times stay exact', async () => {
    const p = partition();
    const scope: GraphScope = { workspaceId: 'ws_refresh', keyMode: 'live' };
    const user: GraphNode = { kind: 'user_id', value: 'u1' };
    const t = tables();
    const MIN = 60_000;
    const visit = (at: number, page: { page_location: string; user_agent: string } | null) =>
      p.batch(async (tx) => {
        const s = await GraphState.load(tx, [{ scope, nodes: [user] }], { maxClusterIdentifiers: 100 });
        const { resolved } = s.link(scope, [user], at, page);
        const changes = await s.save();
        for (const c of changes) t.apply(c);
        return {
          written: [...tx.changes()].map(([k]) => k),
          seen: s.offeredIdentifiers(resolved!, ['user_id'], 1)[0]!.lastSeenAt,
          rows: changes.flatMap((c) => c.nodes.map((r) => r.last_seen_at)),
          sightings: changes.flatMap((c) => c.sightings.map((x) => x.last_seen_at)),
        };
      });
    const key = nodeStoreKey(scope, user);
    const row = () => t.nodes.get(nodeIdOf(scope, user))!;
    expect((await visit(T0, { page_location: 'https://shop.example/', user_agent: 'agent' })).written).toContain(key);
    // A server event 10 minutes later: the cluster's summary takes the time, the entry is left as it was.
    const later = await visit(T0 + 10 * MIN, null);
    expect(later.written).not.toContain(key);
    // The graph sink gets a sighting (node id and time), not the whole row again.
    expect([later.rows, later.sightings]).toEqual([[], [T0 + 10 * MIN]]);
    expect(later.seen).toBe(T0 + 10 * MIN);
    expect(row().last_seen_at).toBe(T0 + 10 * MIN);
    expect((p.store.read(key) as { last_seen_at: number }).last_seen_at).toBe(T0);
    // A late event (5 minutes in) neither moves the time back nor rewrites the entry.
    const late = await visit(T0 + 5 * MIN, null);
    expect(late.written).not.toContain(key);
    expect([late.seen, row().last_seen_at]).toEqual([T0 + 10 * MIN, T0 + 10 * MIN]);
    // Page data, or NODE_REFRESH_MS after the last write: rewritten.
    expect((await visit(T0 + 20 * MIN, { page_location: 'https://shop.example/cart', user_agent: 'agent' })).written).toContain(key);
    expect((await visit(T0 + 30 * MIN, null)).written).not.toContain(key);
    const refreshed = await visit(T0 + 20 * MIN + NODE_REFRESH_MS, null);
    expect(refreshed.written).toContain(key);
    expect([refreshed.rows, refreshed.sightings]).toEqual([[T0 + 20 * MIN + NODE_REFRESH_MS], []]);
    expect((p.store.read(key) as { last_seen_at: number }).last_seen_at).toBe(T0 + 20 * MIN + NODE_REFRESH_MS);
    expect(row().first_seen_at).toBe(T0);
  });

  it('an erasure removes the clusters of the given identifiers and their stable identifiers; later events start afresh', async () => {
    const p = partition();
    const scope: GraphScope = { workspaceId: 'ws_erase', keyMode: 'live' };
    const person: GraphNode[] = [
      { kind: 'user_id', value: 'u1' },
      { kind: 'email_sha256', value: 'e1' },
      { kind: 'client_id', value: 'c1' },
      { kind: 'session_id', value: 's1' },
    ];
    const other: GraphNode[] = [{ kind: 'client_id', value: 'c2' }];
    await p.batch(async (tx) => {
      const s = await GraphState.load(tx, [{ scope, nodes: person }, { scope, nodes: other }], { maxClusterIdentifiers: 100 });
      s.link(scope, person, T0, null);
      s.link(scope, other, T0, null);
      await s.save();
    });
    const changes = await p.batch(async (tx) => {
      const s = await GraphState.loadKeys(tx, [nodeStoreKey(scope, person[0]!)], { maxClusterIdentifiers: 100 });
      expect(s.erase(scope, [nodeStoreKey(scope, person[0]!)])).toBe(1);
      return s.save();
    });
    for (const n of person.slice(0, 3)) expect(p.store.read(nodeStoreKey(scope, n))).toBeUndefined();
    expect(p.store.read(nodeStoreKey(scope, other[0]!))).toBeDefined();
    expect(changes).toHaveLength(1);
    expect(changes[0]!.erased_clusters).toHaveLength(1);
    expect([...changes[0]!.erased_node_ids].sort()).toEqual(person.slice(0, 3).map((n) => nodeIdOf(scope, n)).sort());
    // The session's entry still points at the erased cluster: it counts as absent, and founds a new cluster.
    const again = await p.batch(async (tx) => {
      const s = await GraphState.load(tx, [{ scope, nodes: [person[2]!, person[3]!] }], { maxClusterIdentifiers: 100 });
      const linked = s.link(scope, [person[2]!, person[3]!], T0 + DAY, null);
      return { linked, pii: s.offeredIdentifiers(linked.resolved!, PERSONAL, 5) };
    });
    expect(again.pii).toEqual([]);
    expect(again.linked.resolved).not.toBeNull();
  });

  it('a cluster merged away is never founded again under its id (entries that still point at it stay with the erasure)', async () => {
    const p = partition();
    const scope: GraphScope = { workspaceId: 'ws_refound', keyMode: 'live' };
    const run = eventBatches(p, scope);
    const link = async (at: number, ...nodes: GraphNode[]) => (await run(nodes, (s) => s.link(scope, nodes, at, null).resolved!)).out;
    const founded = await link(T0, n('client_id', 'c1'), n('session_id', 's1'));
    await link(T0, n('email_sha256', 'e1'), n('client_id', 'c2'), n('client_id', 'c3'));
    await link(T0 + 1, n('email_sha256', 'e1'), n('client_id', 'c1'));
    expect((p.store.read(clusterStoreKey(founded)) as ClusterState).into).not.toBeNull();
    await run([n('email_sha256', 'e1')], (s) => s.erase(scope, [nodeStoreKey(scope, n('email_sha256', 'e1'))]));
    const again = await link(T0 + DAY, n('client_id', 'c1'));
    expect(again).not.toBe(founded);
    // s1 still points at the erased person's cluster: absent, so it founds a cluster of its own, not c1's new one.
    const session = await link(T0 + DAY, n('session_id', 's1'));
    expect(session).not.toBe(again);
  });
});
