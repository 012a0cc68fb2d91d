/**
 * Step 4: the platform-ready records (domain/conversion.ts), under every rule of the spec's forwarding section. The
 * ad accounts' time zones come from memory (a short TTL) or ONE query for the workspaces not in memory.
 */
import { propertiesOf } from '../../domain/commerce.js';
import { compactExplanation, type ConversionReady, type PlatformEventRecord, type PlatformUser } from '../../domain/conversion.js';
import type { Sql } from '../../shared/db/db.js';
import type { AttributionKind } from '../attribution.js';
import type { EnrichItem } from '../item.js';
import { explain } from '../explanation.js';
import { conversionsBuilt, pageUrlSource } from '../metrics.js';
import { accountTimeZones, formatInTimeZone } from '../time-zone.js';
import type { TtlCache } from '../ttl-cache.js';
import type { ClusterReads } from './link-identities.js';
import type { Selection } from './select-conversion.js';

export interface Convertible {
  readonly item: EnrichItem;
  readonly selection: Extract<Selection, { kind: 'convert' }>;
  readonly reads: ClusterReads;
  readonly eventId: string;
}

export function createBuildConversionStep(deps: { readonly timeZones: TtlCache<string> }) {
  const zonesOf = (sql: Sql, items: ReadonlyArray<Convertible['item']>) =>
    deps.timeZones.getMany(
      items.map((i) => i.e.workspace_id),
      (missing) => accountTimeZones(sql, missing),
      'UTC',
    );
  const buildConversions = async function buildConversions(sql: Sql, conversions: readonly Convertible[]): Promise<ConversionReady[]> {
    const zones = await zonesOf(
      sql,
      conversions.map((c) => c.item),
    );
    return conversions.map((c) => build(c, zones.get(c.item.e.workspace_id) ?? 'UTC'));
  };
  /** Loads the accounts' time zones the build will need (into the cache), so that the build itself reads none. */
  const prepare = async (sql: Sql, items: ReadonlyArray<Convertible['item']>): Promise<void> => {
    await zonesOf(sql, items); // no items: no keys, no query (TtlCache.getMany)
  };
  return Object.assign(buildConversions, { prepare });
}

function build(
  { item: { e, consent }, selection, reads, eventId }: Convertible,
  timeZone: string,
): ConversionReady {
  const { click, pii, page } = reads;
  const { setup } = selection;
  const user: PlatformUser = {
    ...pii,
    ...(click.ttclid ? { ttclid: click.ttclid } : {}),
    ...(page.userAgent ? { user_agent: page.userAgent } : {}),
  };
  const properties = propertiesOf(e);
  const record: PlatformEventRecord = {
    event: selection.platformEvent,
    event_id: eventId,
    event_time: Math.floor((e.event_time ?? e.received_at) / 1000), // the sender's event time (API-Version 2026-12-01)
    limited_data_use: consent.limitedDataUse,
    page: { url: page.url },
    ...(Object.keys(user).length > 0 ? { user } : {}),
    conversion_date_time: formatInTimeZone(e.event_time ?? e.received_at, timeZone),
    // The spec: "same derivation as event_id" (the idempotency key, else the payload-derived id).
    transaction_id: eventId,
    consent: { ad_user_data: e.consent.ad_user_data, ad_personalization: e.consent.ad_personalization },
    ...(properties ? { properties } : {}),
  };
  const attribution: AttributionKind = click.kind ?? (pii.email || pii.phone || pii.external_id ? 'enhanced' : 'none');
  conversionsBuilt.inc({ attribution, key_mode: e.key_mode });
  pageUrlSource.inc({ source: page.source });
  return {
    v: 1,
    workspace_id: e.workspace_id,
    key_mode: e.key_mode,
    event_id: eventId,
    received_at: e.received_at,
    request_id: e.request_id,
    event_source: setup.event_source,
    event_source_id: setup.event_source_id,
    test_event_code: selection.testEventCode,
    event_name: e.name,
    record,
    // Compact (the values the record holds left out), as conversions.ready carries it on both runtimes and as
    // conversion_explanations stores it: ~20% of the record's bytes fewer to write, read and parse.
    explanation: compactExplanation(explain(record, e.consent, setup.pii_mode, attribution, reads, Boolean(e.session?.user_agent)), record),
  };
}
