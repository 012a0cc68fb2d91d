/**
 * Step 1: which events become conversions? Events selected by the workspace's forwarding setup (its first TikTok
 * destination) or by any of its other destinations, only with ad_storage GRANTED, and test-mode events only for a
 * destination with a test_event_code. A conversion the forwarding setup did not select carries no TikTok event
 * source (domain/conversion.ts, forFirstTiktok): the forwarder files it for the other destinations only.
 * The batch's setups come from memory (a short TTL) or ONE query for the workspaces not in memory.
 */
import type { Sql } from '../../shared/db/db.js';
import { readForwardingSetups, type ForwardingSetup, type PiiMode } from '../../domain/forwarding-setup.js';
import type { EnrichItem } from '../item.js';
import type { TtlCache } from '../ttl-cache.js';

export type SkipReason = 'no_forwarding_setup' | 'not_selected' | 'no_ad_storage_consent' | 'test_mode_without_test_event_code';

export type Selection =
  | {
      readonly kind: 'convert';
      /** The rules the conversion is built under (the forwarding setup's, or the destinations' when it has none). */
      readonly setup: ForwardingSetup;
      readonly platformEvent: string;
      /** Set for test-mode events only; live events never carry it. */
      readonly testEventCode: string | null;
    }
  | { readonly kind: 'skip'; readonly reason: SkipReason };

/** What one of the workspace's other destinations selects (repo.ts in forwarder/destinations keeps the rest). */
export interface DestinationSelection {
  readonly events: ReadonlyArray<{ readonly name: string }>;
  readonly testEventCode: string | null;
  readonly piiMode: PiiMode;
  /** A TikTok destination's click window; null for kinds whose click ids are read from the page URL at send time. */
  readonly clickWindowDays: number | null;
}

/** What decides a workspace's conversions; null: it forwards nowhere. */
export interface WorkspaceSelections {
  readonly setup: ForwardingSetup | null;
  readonly destinations: readonly DestinationSelection[];
}

/**
 * Without a forwarding setup, the click window for a ttclid when no TikTok destination names one: TikTok's own
 * default attribution window for clicks (7 days), the forwarding form's default too.
 */
export const DEFAULT_CLICK_WINDOW_DAYS = 7;

export async function readWorkspaceSelections(sql: Sql, workspaceIds: readonly string[]): Promise<Map<string, WorkspaceSelections>> {
  const setups = await readForwardingSetups(sql, workspaceIds);
  // A destination an admin disconnected takes nothing (forwarder/destinations/fan-out.ts); one never connected yet
  // keeps its conversions waiting for its first connection.
  const r = await sql.query<{ workspace_id: string; setup: unknown }>(
    `SELECT workspace_id, setup FROM destinations
     WHERE workspace_id = ANY($1::text[]) AND NOT (status = 'disconnected' AND connected_at IS NOT NULL)`,
    [workspaceIds],
  );
  const destinations = new Map<string, DestinationSelection[]>();
  for (const row of r.rows) {
    const s = (typeof row.setup === 'string' ? JSON.parse(row.setup) : row.setup) as Record<string, unknown>;
    const events = Array.isArray(s.events) ? (s.events as Array<{ name: string }>).filter((e) => typeof e?.name === 'string') : [];
    destinations.set(row.workspace_id, [
      ...(destinations.get(row.workspace_id) ?? []),
      {
        events,
        testEventCode: typeof s.test_event_code === 'string' && s.test_event_code !== '' ? s.test_event_code : null,
        piiMode: s.pii_mode === 'none' ? 'none' : 'hashed',
        clickWindowDays: typeof s.click_window_days === 'number' ? s.click_window_days : null,
      },
    ]);
  }
  const out = new Map<string, WorkspaceSelections>();
  for (const ws of workspaceIds) {
    const setup = setups.get(ws) ?? null;
    const others = destinations.get(ws) ?? [];
    if (setup !== null || others.length > 0) out.set(ws, { setup, destinations: others });
  }
  return out;
}

/**
 * The rules for an event that only other destinations selected: no TikTok event source (the first TikTok
 * destination does not get it); personal data kept hashed when any of them forwards it (each destination strips
 * what its own pii_mode forbids); the widest click window of its TikTok destinations. Consent rules are the same for
 * every destination.
 */
function destinationsSetup(workspaceId: string, picked: readonly DestinationSelection[]): ForwardingSetup {
  const windows = picked.flatMap((d) => (d.clickWindowDays === null ? [] : [d.clickWindowDays]));
  return {
    workspace_id: workspaceId,
    event_source: '',
    event_source_id: '',
    pii_mode: picked.some((d) => d.piiMode === 'hashed') ? 'hashed' : 'none',
    click_window_days: windows.length > 0 ? Math.max(...windows) : DEFAULT_CLICK_WINDOW_DAYS,
    test_event_code: null,
    events: [],
    updated_at: new Date(0).toISOString(),
  };
}

export function createSelectConversionStep(deps: { readonly setups: TtlCache<WorkspaceSelections | null> }) {
  const skip = (reason: SkipReason): Selection => ({ kind: 'skip', reason });
  return async function selectConversions(sql: Sql, items: readonly EnrichItem[]): Promise<Selection[]> {
    const selections = await deps.setups.getMany(
      items.map((i) => i.e.workspace_id),
      (missing) => readWorkspaceSelections(sql, missing),
      null,
    );
    return items.map(({ e, consent }) => {
      const w = selections.get(e.workspace_id);
      if (!w) return skip('no_forwarding_setup');
      const test = e.key_mode === 'test';
      const { setup } = w;
      const first = setup?.events.find((m) => m.name === e.name);
      const others = w.destinations.filter((d) => d.events.some((m) => m.name === e.name));
      if (!first && others.length === 0) return skip('not_selected');
      if (!consent.forward) return skip('no_ad_storage_consent');
      if (first && setup && (!test || setup.test_event_code)) {
        return { kind: 'convert', setup, platformEvent: first.platform_event, testEventCode: test ? setup.test_event_code : null };
      }
      const picked = test ? others.filter((d) => d.testEventCode !== null) : others;
      if (picked.length === 0) return skip(test ? 'test_mode_without_test_event_code' : 'not_selected');
      // Each destination maps the sender's event name to its own platform event (forwarder/destinations/fan-out.ts).
      return { kind: 'convert', setup: destinationsSetup(e.workspace_id, picked), platformEvent: e.name, testEventCode: null };
    });
  };
}
