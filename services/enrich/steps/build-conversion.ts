/** Step 4: the platform-ready record (shared/conversion.ts), under every rule of the spec's forwarding section. */
import type { ConversionReady, PlatformEventRecord, PlatformUser } from '../../shared/conversion.js';
import type { Sql } from '../../shared/db/db.js';
import type { EventEnvelope } from '../../shared/envelope.js';
import { findClickId, type AttributionKind } from '../attribution.js';
import type { ConsentDecision } from '../consent.js';
import type { IdentityGraphRepo } from '../identity/graph-repo.js';
import { conversionsBuilt, pageUrlSource } from '../metrics.js';
import { resolvePage } from '../page-data.js';
import { personalIdentifiers } from '../personal-data.js';
import { propertiesOf } from '../properties.js';
import { accountTimeZone, formatInTimeZone } from '../time-zone.js';
import type { TtlCache } from '../ttl-cache.js';
import type { Selection } from './select-conversion.js';

export interface BuildDeps {
  readonly graph: IdentityGraphRepo;
  readonly timeZones: TtlCache<string>;
}

export function createBuildConversionStep(deps: BuildDeps) {
  return async function buildConversion(
    e: EventEnvelope,
    consent: ConsentDecision,
    selection: Extract<Selection, { kind: 'convert' }>,
    clusterId: string | null,
    eventId: string,
    sql: Sql,
  ): Promise<{ conversion: ConversionReady; attribution: AttributionKind }> {
    const { setup } = selection;
    const click = await findClickId(deps.graph, sql, e, consent, clusterId, setup.click_window_days);
    const pii = await personalIdentifiers(deps.graph, sql, consent, setup.pii_mode, clusterId);
    const page = await resolvePage(deps.graph, sql, e, clusterId);
    const timeZone = await deps.timeZones.get(e.workspace_id, () => accountTimeZone(sql, e.workspace_id));

    const user: PlatformUser = {
      ...pii,
      ...(click.ttclid ? { ttclid: click.ttclid } : {}),
      ...(page.userAgent ? { user_agent: page.userAgent } : {}),
    };
    const properties = propertiesOf(e.payload);
    const record: PlatformEventRecord = {
      event: selection.platformEvent,
      event_id: eventId,
      event_time: Math.floor(e.received_at / 1000),
      limited_data_use: consent.limitedDataUse,
      page: { url: page.url },
      ...(Object.keys(user).length > 0 ? { user } : {}),
      conversion_date_time: formatInTimeZone(e.received_at, timeZone),
      // The spec: "same derivation as event_id" (the idempotency key, else the payload-derived id).
      transaction_id: eventId,
      consent: { ad_user_data: e.consent.ad_user_data, ad_personalization: e.consent.ad_personalization },
      ...(properties ? { properties } : {}),
    };
    const attribution: AttributionKind = click.kind ?? (pii.email || pii.phone || pii.external_id ? 'enhanced' : 'none');
    conversionsBuilt.inc({ attribution, key_mode: e.key_mode });
    pageUrlSource.inc({ source: page.source });
    return {
      attribution,
      conversion: {
        v: 1,
        workspace_id: e.workspace_id,
        key_mode: e.key_mode,
        event_id: eventId,
        received_at: e.received_at,
        request_id: e.request_id,
        event_source: setup.event_source,
        event_source_id: setup.event_source_id,
        test_event_code: selection.testEventCode,
        record,
      },
    };
  };
}
