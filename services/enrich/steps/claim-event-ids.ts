/** Step 3: conversion-level dedup on event_id (see conversion-ids.ts), for the batch's conversions in one statement. */
import type { Sql } from '../../shared/db/db.js';
import { claimEventIds } from '../conversion-ids.js';
import type { EnrichItem } from '../item.js';

export function createClaimEventIdsStep() {
  return async function claimConversions(sql: Sql, conversions: ReadonlyArray<{ item: EnrichItem; eventId: string }>): Promise<boolean[]> {
    return claimEventIds(
      sql,
      conversions.map(({ item, eventId }) => ({
        scope: item.scope,
        eventId,
        source: `${item.record.topic}/${item.record.partition}/${item.record.offset}`,
        at: item.e.received_at,
      })),
    );
  };
}
