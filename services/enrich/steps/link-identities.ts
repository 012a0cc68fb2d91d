/**
 * Step 3, for every event: add what its consent allows to the identity graph, and, for conversions, read what their
 * cluster knows right after their own link, exactly as one event at a time would. Live, the graph is the stage's
 * partition-local state (identity/graph-state.ts); a replay reads the queryable tables (identity/graph-repo.ts) and
 * changes nothing, since the live stage owns the state.
 */
import type { Sql } from '../../shared/db/db.js';
import { Topics } from '../../shared/topics.js';
import type { KeyValueStore, OutputRecord } from '../../stream/contract.js';
import { findClickId } from '../attribution.js';
import { pageDataOf } from '../identity/identifiers.js';
import { graphKey, loadGraph, type ClusterReader, type GraphScope, type LinkResult } from '../identity/graph-repo.js';
import { GraphState, type GraphEntry } from '../identity/graph-state.js';
import type { GraphNode } from '../identity/kinds.js';
import type { EnrichItem } from '../item.js';
import { clusterRefusals, identifiersSkipped } from '../metrics.js';
import { resolvePage, type ResolvedPage } from '../page-data.js';
import { explainPersonalIdentifiers, type ExplainedPersonalIdentifiers, type PersonalIdentifiers } from '../personal-data.js';
import type { Selection } from './select-conversion.js';

/** What a conversion takes from the graph, read at its event's turn in the batch. */
export interface ClusterReads {
  readonly click: ReturnType<typeof findClickId>;
  readonly pii: PersonalIdentifiers;
  /** Which graph node supplied each personal field, or why none went (the conversion's explanation). */
  readonly piiWhy: Omit<ExplainedPersonalIdentifiers, 'pii'>;
  readonly page: ResolvedPage;
}

/** A withheld purpose of the event (consent withdrawal, docs/consent.md), or null when it grants both. */
function withdrawn(item: EnrichItem): { adStorage: boolean; adUserData: boolean } | null {
  const adStorage = !item.consent.graph;
  const adUserData = !item.consent.sendPersonalData;
  return adStorage || adUserData ? { adStorage, adUserData } : null;
}

/** The graph one batch works on: the live state, or a replay's read-only view. */
interface BatchGraph extends ClusterReader {
  link(scope: GraphScope, nodes: readonly GraphNode[], seenAt: number, page: ReturnType<typeof pageDataOf>): LinkResult;
  withdraw(scope: GraphScope, nodes: readonly GraphNode[], at: number, purposes: { readonly adStorage: boolean; readonly adUserData: boolean }): void;
}

export interface LinkContext {
  readonly sql: Sql;
  /** The stage's state (live); absent in a replay. */
  readonly store?: KeyValueStore<GraphEntry>;
  readonly emit?: (output: OutputRecord) => void;
}

export function createLinkIdentitiesStep(deps: { readonly maxClusterIdentifiers: number; readonly retentionMs?: number }) {
  return async function linkIdentities(ctx: LinkContext, items: readonly EnrichItem[], selections: readonly Selection[]): Promise<Array<ClusterReads | null>> {
    for (const i of items) for (const s of i.graph.skipped) identifiersSkipped.inc({ reason: s.reason });
    // An event that withholds consent adds nothing, but its identifiers find the clusters its withdrawal applies to.
    const touched = (i: EnrichItem) => (withdrawn(i) ? [...i.graph.nodes, ...i.graph.withheld] : i.graph.nodes);
    const state = ctx.store
      ? await GraphState.load(ctx.store, items.map((i) => ({ scope: i.scope, nodes: i.graph.nodes, lookedUp: withdrawn(i) ? i.graph.withheld : undefined })), deps)
      : undefined;
    const graph: BatchGraph = state ?? (await loadGraph(ctx.sql, items.flatMap((i) => touched(i).map((node) => ({ scope: i.scope, node }))), deps));
    const reads = items.map((item, k) => {
      const { e, consent } = item;
      // Session data is kept under the same rule as the graph itself (ad_storage).
      const linked = graph.link(item.scope, item.graph.nodes, e.received_at, consent.graph ? pageDataOf(e) : null);
      if (linked.refused) clusterRefusals.inc();
      const withdrawal = withdrawn(item);
      if (withdrawal) graph.withdraw(item.scope, touched(item), e.received_at, withdrawal);
      const selection = selections[k]!;
      if (selection.kind !== 'convert') return null;
      const { setup } = selection;
      const { pii, ...piiWhy } = explainPersonalIdentifiers(graph, consent, setup.pii_mode, linked.resolved);
      return {
        click: findClickId(graph, e, consent, linked.resolved, setup.click_window_days),
        pii,
        piiWhy,
        page: resolvePage(graph, e, linked.resolved),
      };
    });
    if (state) {
      for (const changes of await state.save()) {
        ctx.emit!({ topic: Topics.identityChanges, key: graphKey({ workspaceId: changes.workspace_id, keyMode: changes.key_mode }), value: changes });
      }
    }
    return reads;
  };
}
