/**
 * Enrich's own metrics (the per-outcome counts, ok/drop by reason/dlq, are the runtime's stage_records_total).
 * NOTE: these count processing attempts: a batch retried after a failed commit counts again, so read them as rates.
 */
import { Counter, Gauge } from 'prom-client';
import { registry } from '../shared/metrics.js';

export const identifiersSkipped = new Counter({
  name: 'identity_identifiers_skipped_total',
  help: 'Identifiers not written to the identity graph, by reason (consent_ad_storage, consent_ad_user_data, junk, unsupported_kind)',
  labelNames: ['reason'] as const,
  registers: [registry],
});

export const clusterRefusals = new Counter({
  name: 'identity_cluster_refusals_total',
  help: 'Links refused because the merged identity cluster would exceed the size cap',
  registers: [registry],
});

export const conversionsBuilt = new Counter({
  name: 'enrich_conversions_total',
  help: 'Conversions emitted, by attribution (event_click, graph_click, enhanced, none) and test/live mode',
  labelNames: ['attribution', 'key_mode'] as const,
  registers: [registry],
});

export const pageUrlSource = new Counter({
  name: 'enrich_page_url_total',
  help: 'Where a conversion took page.url from (event, graph, none)',
  labelNames: ['source'] as const,
  registers: [registry],
});

export const timeZoneFallbacks = new Counter({
  name: 'enrich_time_zone_fallback_total',
  help: 'Conversions whose date was expressed in UTC because the connection had no usable time zone',
  labelNames: ['reason'] as const,
  registers: [registry],
});

export const graphSinkDelay = new Gauge({
  name: 'identity_graph_sink_delay_seconds',
  help: "How far the queryable identity tables trail enrich's graph: age of the newest change the graph sink applied, when it applied it",
  registers: [registry],
});
