/**
 * Step 2: does this event become a conversion? Only events selected in the workspace's forwarding setup, only with
 * ad_storage GRANTED, and test-mode events only when the setup has a test_event_code (which they then carry).
 */
import type { Sql } from '../../shared/db/db.js';
import type { EventEnvelope } from '../../shared/envelope.js';
import { readForwardingSetup, type ForwardingSetup } from '../../shared/forwarding-setup.js';
import type { ConsentDecision } from '../consent.js';
import type { TtlCache } from '../ttl-cache.js';

export type SkipReason = 'no_forwarding_setup' | 'not_selected' | 'no_ad_storage_consent' | 'test_mode_without_test_event_code';

export type Selection =
  | {
      readonly kind: 'convert';
      readonly setup: ForwardingSetup;
      readonly platformEvent: string;
      /** Set for test-mode events only; live events never carry it. */
      readonly testEventCode: string | null;
    }
  | { readonly kind: 'skip'; readonly reason: SkipReason };

export function createSelectConversionStep(deps: { readonly setups: TtlCache<ForwardingSetup | null> }) {
  const skip = (reason: SkipReason): Selection => ({ kind: 'skip', reason });
  return async function selectConversion(e: EventEnvelope, consent: ConsentDecision, sql: Sql): Promise<Selection> {
    const setup = await deps.setups.get(e.workspace_id, async () => (await readForwardingSetup(sql, e.workspace_id)) ?? null);
    if (!setup) return skip('no_forwarding_setup');
    const selected = setup.events.find((m) => m.name === e.name);
    if (!selected) return skip('not_selected');
    if (!consent.forward) return skip('no_ad_storage_consent');
    if (e.key_mode === 'test' && !setup.test_event_code) return skip('test_mode_without_test_event_code');
    return {
      kind: 'convert',
      setup,
      platformEvent: selected.platform_event,
      testEventCode: e.key_mode === 'test' ? setup.test_event_code : null,
    };
  };
}
