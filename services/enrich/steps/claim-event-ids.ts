/** Step 2: conversion-level dedup on event_id (see event-id-claims.ts), for the batch's conversions in one store read. */
import type { KeyValueStore } from '../../stream/store.js';
import { claimEventIds, type EventIdClaim } from '../event-id-claims.js';
import type { EnrichItem } from '../item.js';

export function createClaimEventIdsStep() {
  return async function claimConversions(
    store: KeyValueStore<EventIdClaim>,
    conversions: ReadonlyArray<{ item: EnrichItem; eventId: string }>,
  ): Promise<boolean[]> {
    return claimEventIds(
      store,
      conversions.map(({ item, eventId }) => ({ scope: item.scope, eventId, at: item.e.received_at })),
    );
  };
}
