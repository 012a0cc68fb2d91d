/** Step 3: conversion-level dedup on event_id (see conversion-ids.ts), with a periodic purge of old claims. */
import type { Sql } from '../../shared/db/db.js';
import type { EventEnvelope } from '../../shared/envelope.js';
import type { InputRecord } from '../../stream/contract.js';
import { claimEventId, purgeConversionIds } from '../conversion-ids.js';
import { scopeOf } from '../scope.js';

const PURGE_EVERY_MS = 10 * 60_000;

export function createClaimEventIdStep(deps: { readonly windowMs: number; readonly now?: () => number }) {
  const now = deps.now ?? Date.now;
  let lastPurge = 0;
  return async function claimConversion(e: EventEnvelope, eventId: string, record: InputRecord<unknown>, sql: Sql): Promise<boolean> {
    if (now() - lastPurge >= PURGE_EVERY_MS) {
      // Inside the stage's transaction: if it rolls back, the purge simply happens again next time.
      lastPurge = now();
      await purgeConversionIds(sql, deps.windowMs);
    }
    const source = `${record.topic}/${record.partition}/${record.offset}`;
    return claimEventId(sql, scopeOf(e), eventId, source, e.received_at);
  };
}
