/**
 * Step 2, for every event: add what its consent allows to the identity graph, and, for the events that become
 * conversions, read what their cluster knows (click id, hashed identifiers, session data) right after their own
 * link, exactly as one event at a time would. Set-based: one lock statement, one load, one write of nodes and one of
 * edges for the whole batch (identity/graph-repo.ts).
 */
import type { Sql } from '../../shared/db/db.js';
import { findClickId } from '../attribution.js';
import { pageDataOf } from '../identity/identifiers.js';
import { postgresGraphStore, type GraphStore } from '../identity/graph-repo.js';
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

export function createLinkIdentitiesStep(deps: { readonly maxClusterIdentifiers: number; readonly store?: GraphStore }) {
  const store = deps.store ?? postgresGraphStore;
  return async function linkIdentities(sql: Sql, items: readonly EnrichItem[], selections: readonly Selection[]): Promise<Array<ClusterReads | null>> {
    for (const i of items) for (const s of i.graph.skipped) identifiersSkipped.inc({ reason: s.reason });
    // An event that withholds consent adds nothing, but its identifiers find the clusters its withdrawal applies to.
    const touched = (i: EnrichItem) => (withdrawn(i) ? [...i.graph.nodes, ...i.graph.withheld] : i.graph.nodes);
    const linking = items.filter((i) => touched(i).length > 0);
    await store.lock(
      sql,
      linking.map((i) => i.scope),
    );
    const graph = await store.load(
      sql,
      linking.flatMap((i) => touched(i).map((node) => ({ scope: i.scope, node }))),
      deps,
    );
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
    await store.save(sql, graph);
    return reads;
  };
}
