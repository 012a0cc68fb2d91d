/** Step 1, for every event: add what its consent allows to the identity graph and find its cluster. */
import type { Sql } from '../../shared/db/db.js';
import type { EventEnvelope } from '../../shared/envelope.js';
import type { ConsentDecision } from '../consent.js';
import type { IdentityGraphRepo, LinkResult } from '../identity/graph-repo.js';
import { graphInputOf, pageDataOf } from '../identity/identifiers.js';
import { clusterRefusals, identifiersSkipped } from '../metrics.js';
import { scopeOf } from '../scope.js';

/** Advisory lock class of identity-graph updates (the second key is the graph's hash). */
const GRAPH_LOCK_CLASS = 7_312;

export function createUpdateGraphStep(deps: { readonly graph: IdentityGraphRepo }) {
  return async function updateGraph(
    e: EventEnvelope,
    consent: ConsentDecision,
    atomically: <T>(fn: (sql: Sql) => Promise<T>) => Promise<T>,
  ): Promise<LinkResult> {
    const input = graphInputOf(e, consent);
    for (const s of input.skipped) identifiersSkipped.inc({ reason: s.reason });
    // Session data is kept under the same rule as the graph itself (ad_storage).
    const page = consent.graph ? pageDataOf(e) : null;
    const scope = scopeOf(e);
    // Linking reads clusters and then merges them: one transaction, serialised per graph (workspace and key mode),
    // so two consumers on different partitions never merge the same clusters from stale reads.
    const linked = await atomically(async (sql) => {
      await sql.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [GRAPH_LOCK_CLASS, `${scope.workspaceId}:${scope.keyMode}`]);
      return deps.graph.link(sql, scope, input.nodes, e.received_at, page);
    });
    if (linked.refused) clusterRefusals.inc();
    return linked;
  };
}
