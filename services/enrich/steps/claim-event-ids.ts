/**
 * Step 2: conversion-level dedup on event_id (see event-id-claims.ts), for the batch's conversions in one store read.
 *
 * An event that dedupe keyed (an idempotency key: endpoint A's, or B's header) reached enrich only as the first of its
 * key within dedupe's window, and its event_id is that key (B: the key and the event's index in that one request). When
 * that window covers the claim window, a claim would stop nothing that dedupe let through, save a repeat in the minutes
 * between the two windows' clocks (receive time against processing time), which the forwarder's sent ledger stops at
 * send: so such events claim nothing, and only a batch's own repeats are dropped (docs/pipeline.md). Events without a
 * key (B without the header, a payload-derived id) always claim.
 */
import type { KeyValueStore } from '../../stream/store.js';
import { claimEventIds, type EventIdClaim } from '../event-id-claims.js';
import type { EnrichItem } from '../item.js';

export interface ClaimOptions {
  /** Whether events dedupe keyed claim too: true unless dedupe's window covers the claim window. */
  readonly claimDeduped: boolean;
}

export function createClaimEventIdsStep(opts: ClaimOptions) {
  return async function claimConversions(
    store: KeyValueStore<EventIdClaim>,
    conversions: ReadonlyArray<{ item: EnrichItem; eventId: string }>,
  ): Promise<boolean[]> {
    const claiming = opts.claimDeduped ? conversions : conversions.filter(({ item }) => item.e.dedupe === null);
    const claimed = await claimEventIds(
      store,
      claiming.map(({ item, eventId }) => ({ scope: item.scope, eventId, at: item.e.received_at })),
    );
    if (claiming === conversions) return claimed;
    const won = new Map(claiming.map((c, n) => [c, claimed[n]!]));
    return firstOfEachEventId(conversions).map((first, n) => won.get(conversions[n]!) ?? first);
  };
}

/** The first conversion of each (workspace, key mode, event_id) in the batch: what a batch decides without the store. */
export function firstOfEachEventId(conversions: ReadonlyArray<{ item: EnrichItem; eventId: string }>): boolean[] {
  const seen = new Set<string>();
  return conversions.map(({ item, eventId }) => {
    const k = `${item.scope.workspaceId}\n${item.scope.keyMode}\n${eventId}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
