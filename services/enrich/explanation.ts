/**
 * "Why this field" (docs/privacy.md): for each user field of a conversion, the rule that let it go or kept it back —
 * the consent values the event carried, the setup's PII mode, the graph node that supplied it, click or enhanced
 * attribution. Built by enrich with the conversion and carried on it (conversions.ready); the forwarder's filing
 * stores it (saveExplanations, one statement per batch) and GET /admin/v1/workspaces/{ws}/conversions/{event_id}
 * reads it; kept CONVERSION_EXPLANATION_RETENTION_DAYS.
 */
import { compactExplanation, type AttributionKind, type ConversionExplanation, type ConversionReady, type FieldExplanation, type PlatformEventRecord } from '../domain/conversion.js';
import { LRUCache } from 'lru-cache';
import type { Sql } from '../shared/db/db.js';
import { joinJsonTexts, jsonText, splitJsonTexts, unchangingJsonText } from '../shared/db/json-texts.js';
import type { ConsentState } from '../domain/envelope.js';
import type { PiiMode } from '../domain/forwarding-setup.js';
import type { ClusterReads } from './steps/link-identities.js';

/** A graph node's times recur across its person's conversions: each is formatted once while it stays recent. */
const isoTimes = new LRUCache<number, string>({ max: 50_000 });
function iso(ms: number): string {
  let s = isoTimes.get(ms);
  if (s === undefined) isoTimes.set(ms, (s = new Date(ms).toISOString()));
  return s;
}

export function explain(
  record: PlatformEventRecord,
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
  const user = record.user;
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
  fields.push({ field: 'page.url', sent: record.page.url !== '', rule: reads.page.source, value: record.page.url });
  return { consent, pii_mode: piiMode, attribution, limited_data_use: record.limited_data_use, fields };
}

/** One statement for the batch's conversions (an upsert: a batch processed again writes the same rows), each explanation in its compact form. */
export async function saveExplanations(sql: Sql, conversions: readonly ConversionReady[]): Promise<void> {
  const rows = conversions.flatMap((conversion) => (conversion.explanation ? [{ conversion, explanation: conversion.explanation }] : []));
  if (rows.length === 0) return;
  // The keys as text[], the two documents of each row as texts of JSON documents (shared/db/json-texts.ts).
  await sql.query(
    `INSERT INTO conversion_explanations (workspace_id, key_mode, event_id, record, explanation)
     SELECT w, m, e, r::json, x::json
     FROM unnest($1::text[], $2::text[], $3::text[], ${splitJsonTexts('$4')}, ${splitJsonTexts('$5')}) AS t(w, m, e, r, x)
     ON CONFLICT (workspace_id, key_mode, event_id) DO UPDATE SET
       record = EXCLUDED.record, explanation = EXCLUDED.explanation, created_at = now()`,
    [
      rows.map((r) => r.conversion.workspace_id),
      rows.map((r) => r.conversion.key_mode),
      rows.map((r) => r.conversion.event_id),
      joinJsonTexts(rows.map((r) => unchangingJsonText(r.conversion.record))),
      joinJsonTexts(rows.map((r) => jsonText(compactExplanation(r.explanation, r.conversion.record)))),
    ],
  );
}
