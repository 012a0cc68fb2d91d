/**
 * "Why this field" (docs/privacy.md): for each user field of a conversion, the rule that let it go or kept it back —
 * the consent values the event carried, the setup's PII mode, the graph node that supplied it, click or enhanced
 * attribution. Written with the conversion in enrich's batch transaction (one statement per batch) and read by
 * GET /admin/v1/workspaces/{ws}/conversions/{event_id}; kept CONVERSION_EXPLANATION_RETENTION_DAYS.
 */
import type { ConversionReady } from '../shared/conversion.js';
import type { Sql } from '../shared/db/db.js';
import type { ConsentState } from '../shared/envelope.js';
import type { PiiMode } from '../shared/forwarding-setup.js';
import type { AttributionKind } from './attribution.js';
import type { ClusterReads } from './steps/link-identities.js';

export interface FieldExplanation {
  readonly field: string;
  readonly sent: boolean;
  /** The rule that let it go (`graph_link`, `event_click`, `graph_click`, `event`, `graph`) or kept it back. */
  readonly rule: string;
  readonly value?: string;
  /** For a value from the identity graph: the node that supplied it and when consenting events saw it. */
  readonly graph_node?: { readonly kind: string; readonly first_seen_at: string; readonly last_seen_at: string };
}

export interface ConversionExplanation {
  readonly consent: ConsentState;
  readonly pii_mode: PiiMode;
  readonly attribution: AttributionKind;
  readonly limited_data_use: boolean;
  readonly fields: readonly FieldExplanation[];
}

const iso = (ms: number): string => new Date(ms).toISOString();

export function explain(
  c: ConversionReady,
  consent: ConsentState,
  piiMode: PiiMode,
  attribution: AttributionKind,
  reads: ClusterReads,
  ownUserAgent: boolean,
): ConversionExplanation {
  const fields: FieldExplanation[] = [];
  for (const field of ['user.email', 'user.phone', 'user.external_id'] as const) {
    const sources = reads.piiWhy.sources.filter((s) => s.field === field);
    if (sources.length === 0) fields.push({ field, sent: false, rule: reads.piiWhy.withheld ?? 'none_offered' });
    for (const s of sources) {
      fields.push({
        field,
        sent: true,
        rule: 'graph_link',
        value: s.value,
        graph_node: { kind: s.node_kind, first_seen_at: iso(s.first_seen_at), last_seen_at: iso(s.last_seen_at) },
      });
    }
  }
  const user = c.record.user;
  fields.push(
    user?.ttclid
      ? { field: 'user.ttclid', sent: true, rule: reads.click.kind!, value: user.ttclid }
      : { field: 'user.ttclid', sent: false, rule: consent.ad_storage === 'GRANTED' ? 'no_click_in_window' : 'ad_storage_not_granted' },
  );
  fields.push(
    user?.user_agent
      ? { field: 'user.user_agent', sent: true, rule: ownUserAgent ? 'event' : 'graph', value: user.user_agent }
      : { field: 'user.user_agent', sent: false, rule: 'none_known' },
  );
  fields.push({ field: 'page.url', sent: c.record.page.url !== '', rule: reads.page.source, value: c.record.page.url });
  return { consent, pii_mode: piiMode, attribution, limited_data_use: c.record.limited_data_use, fields };
}

/** One statement for the batch's conversions (an upsert: a batch processed again writes the same rows). */
export async function saveExplanations(
  sql: Sql,
  rows: ReadonlyArray<{ readonly conversion: ConversionReady; readonly explanation: ConversionExplanation }>,
): Promise<void> {
  if (rows.length === 0) return;
  await sql.query(
    `INSERT INTO conversion_explanations (workspace_id, key_mode, event_id, record, explanation)
     SELECT workspace_id, key_mode, event_id, record, explanation
     FROM json_to_recordset($1::json) AS t(workspace_id text, key_mode text, event_id text, record jsonb, explanation jsonb)
     ON CONFLICT (workspace_id, key_mode, event_id) DO UPDATE SET
       record = EXCLUDED.record, explanation = EXCLUDED.explanation, created_at = now()`,
    [
      JSON.stringify(
        rows.map((r) => ({
          workspace_id: r.conversion.workspace_id,
          key_mode: r.conversion.key_mode,
          event_id: r.conversion.event_id,
          record: r.conversion.record,
          explanation: r.explanation,
        })),
      ),
    ],
  );
}
