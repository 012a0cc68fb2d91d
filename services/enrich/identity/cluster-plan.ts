/**
 * How an event's nodes join the graph, decided in memory from what the store holds (pure, so every branch is
 * unit-tested). Clusters are connected components kept as a label on each node; linking relabels the smaller
 * clusters into the largest. The giant-cluster guard: a link that would give a cluster more than `cap` stable
 * identifiers is refused, because a shared or junk identifier would otherwise fuse thousands of people and send
 * one person's hashed email with everybody's conversions.
 */
import { sha256Hex } from '../../shared/ids.js';
import { KIND_RULES, nodeKey, type GraphNode } from './kinds.js';

export interface ClusterPlanInput {
  readonly workspaceId: string;
  readonly keyMode: string;
  /** The event's nodes, highest resolution priority first (identifiers.ts). */
  readonly nodes: readonly GraphNode[];
  /** Cluster of each node already in the graph, by nodeKey. */
  readonly existing: ReadonlyMap<string, string>;
  /** Stable identifiers per existing cluster. */
  readonly stableCounts: ReadonlyMap<string, number>;
  readonly cap: number;
}

export interface ClusterPlan {
  /** Cluster for every node of the event after the link (existing nodes: after relabelling). */
  readonly clusterOf: ReadonlyMap<string, string>;
  /** Clusters to relabel into `into`. */
  readonly merge: { readonly into: string; readonly from: readonly string[] } | null;
  /** True when the cap refused (part of) the link. */
  readonly refused: boolean;
  /** The cluster the event resolves to: that of its highest-priority merging node. null: no such node. */
  readonly resolved: string | null;
}

/** Deterministic cluster id from the node that founded it: a replay founds the same cluster. */
export function clusterIdFor(workspaceId: string, keyMode: string, n: GraphNode): string {
  return `c_${sha256Hex(`${workspaceId}\n${keyMode}\n${n.kind}\n${n.value}`).slice(0, 32)}`;
}

export function planCluster(input: ClusterPlanInput): ClusterPlan {
  const { nodes, existing, stableCounts, cap } = input;
  const idFor = (n: GraphNode) => clusterIdFor(input.workspaceId, input.keyMode, n);
  const clusterOf = new Map<string, string>();
  // Each node's key once (they are looked up several times below).
  const person: Array<{ readonly n: GraphNode; readonly key: string; readonly prior: string | undefined }> = [];
  for (const n of nodes) {
    const key = nodeKey(n);
    // Non-merging nodes (organisation) are each their own singleton, linked by edges only.
    if (!KIND_RULES[n.kind].merges) clusterOf.set(key, existing.get(key) ?? idFor(n));
    else person.push({ n, key, prior: existing.get(key) });
  }
  if (person.length === 0) return { clusterOf, merge: null, refused: false, resolved: null };

  let firstFresh: GraphNode | undefined;
  let freshStable = 0;
  const found = new Set<string>();
  for (const p of person) {
    if (p.prior !== undefined) found.add(p.prior);
    else {
      firstFresh ??= p.n;
      if (KIND_RULES[p.n.kind].stable) freshStable++;
    }
  }
  const clusters = [...found];
  const sizeOf = (c: string) => stableCounts.get(c) ?? 0;

  let merge: ClusterPlan['merge'] = null;
  let refused = false;
  let freshInto: string;
  if (clusters.length === 0) {
    // NOTE: an event's own identifiers always link, even past the cap: they are bounded by the request limits.
    freshInto = idFor(person[0]!.n);
  } else if (clusters.reduce((sum, c) => sum + sizeOf(c), 0) + freshStable <= cap) {
    const into = clusters.length === 1 ? clusters[0]! : [...clusters].sort((a, b) => sizeOf(b) - sizeOf(a) || (a < b ? -1 : 1))[0]!;
    const from = clusters.filter((c) => c !== into);
    if (from.length > 0) merge = { into, from };
    freshInto = into;
  } else {
    // Refused: no clusters are fused. New identifiers join the cluster of the event's best known identifier if it
    // has room, else found a cluster of their own.
    const primary = person.find((p) => p.prior !== undefined)!.prior!;
    // Sessions and click ids do not grow the count: they always fit.
    const fits = freshStable === 0 || sizeOf(primary) + freshStable <= cap;
    freshInto = fits ? primary : idFor(firstFresh!);
    refused = clusters.length > 1 || !fits;
  }
  for (const { key, prior } of person) {
    clusterOf.set(key, prior === undefined ? freshInto : merge?.from.includes(prior) ? merge.into : prior);
  }
  return { clusterOf, merge, refused, resolved: clusterOf.get(person[0]!.key)! };
}
