/** Step 1, for every event: add what its consent allows to the identity graph and find its cluster. */
import type { Sql } from '../../shared/db/db.js';
import type { EventEnvelope } from '../../shared/envelope.js';
import type { ConsentDecision } from '../consent.js';
import type { IdentityGraphRepo, LinkResult } from '../identity/graph-repo.js';
import { graphInputOf, pageDataOf } from '../identity/identifiers.js';
import { clusterRefusals, identifiersSkipped } from '../metrics.js';
import { scopeOf } from '../scope.js';

export function createUpdateGraphStep(deps: { readonly graph: IdentityGraphRepo }) {
  return async function updateGraph(e: EventEnvelope, consent: ConsentDecision, sql: Sql): Promise<LinkResult> {
    const input = graphInputOf(e, consent);
    for (const s of input.skipped) identifiersSkipped.inc({ reason: s.reason });
    // Session data is kept under the same rule as the graph itself (ad_storage).
    const page = consent.graph ? pageDataOf(e) : null;
    const linked = await deps.graph.link(sql, scopeOf(e), input.nodes, e.received_at, page);
    if (linked.refused) clusterRefusals.inc();
    return linked;
  };
}
