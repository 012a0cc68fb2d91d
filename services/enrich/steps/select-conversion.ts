/**
 * Step 1: which events become conversions? Only events selected in the workspace's forwarding setup, only with
 * ad_storage GRANTED, and test-mode events only when the setup has a test_event_code (which they then carry).
 * The batch's setups come from memory (a short TTL) or ONE query for the workspaces not in memory.
 */
import type { Sql } from '../../shared/db/db.js';
import { readForwardingSetups, type ForwardingSetup } from '../../shared/forwarding-setup.js';
import type { EnrichItem } from '../item.js';
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
  return async function selectConversions(sql: Sql, items: readonly EnrichItem[]): Promise<Selection[]> {
    const setups = await deps.setups.getMany(
      items.map((i) => i.e.workspace_id),
      (missing) => readForwardingSetups(sql, missing),
      null,
    );
    return items.map(({ e, consent }) => {
      const setup = setups.get(e.workspace_id);
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
    });
  };
}
