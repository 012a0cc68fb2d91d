/**
 * The dedupe stage: events.raw → events.deduped. First seen wins per (workspace, idempotency key), across requests
 * and inside one batch; for endpoint B the request key (a later request with a seen key is dropped whole). The state
 * lives in the runtime's store (state_store embedded, a compacted changelog on Kafka), written in the same atomic
 * step as the output, so a crash can neither lose an event nor let a duplicate through.
 */
import { envelopeKey, graphOwnerKey } from '../domain/envelope.js';
import { checkEnvelope } from '../domain/envelope-guard.js';
import { dlq, drop, ok, type Outcome, type Stage } from '../stream/contract.js';
import { Topics } from '../shared/topics.js';
import { CompactDedupeStore } from './compact-store.js';
import { dedupeVerdict, type DedupeState } from './seen-marker.js';

export const DEDUPE_STAGE = 'dedupe';
export const DEDUPE_STORE = 'dedupe';
export const DEFAULT_DEDUPE_WINDOW_MS = 7 * 24 * 3600_000;

export interface DedupeDeps {
  /** How long a key stays "seen" (DEDUPE_WINDOW_HOURS); also the store's retention. */
  readonly windowMs: number;
}

export function createDedupeProcessor(deps: DedupeDeps): Stage<unknown, DedupeState> {
  return {
    name: DEDUPE_STAGE,
    input: Topics.eventsRaw,
    // Its only writes are its store's: the embedded runtime processes its batches before their transactions.
    ahead: true,
    store: {
      name: DEDUPE_STORE,
      changelog: Topics.dedupeState,
      retentionMs: deps.windowMs,
      // A fraction of the generic store's memory per key (bench/README.md, dedupe-memory).
      partitionStore: () => new CompactDedupeStore(deps.windowMs),
    },
    async processBatch(records, ctx) {
      const checked = records.map((r) => checkEnvelope(r.value));
      // The store key is the partition key itself, so the state co-partitions with events.raw. One read for the batch.
      await ctx.store.getMany(checked.flatMap((c) => (c.ok && c.envelope.dedupe ? [envelopeKey(c.envelope)] : [])));
      const outcomes: Outcome[] = [];
      for (let i = 0; i < records.length; i++) {
        const c = checked[i]!;
        if (!c.ok) {
          outcomes.push(dlq('invalid_envelope', c.reason));
          continue;
        }
        const e = c.envelope;
        const pass = ok({ topic: Topics.eventsDeduped, key: graphOwnerKey(e), value: e });
        // Endpoint B without Idempotency-Key: nothing to dedupe here; enrich dedupes on the derived event_id.
        if (!e.dedupe) {
          outcomes.push(pass);
          continue;
        }
        const storeKey = envelopeKey(e);
        // Reads see this batch's earlier writes: first seen wins inside one batch too.
        // (Not `{ ...e }`: a spread would read, and so parse, the payload: avro-mapping.ts.)
        const verdict = dedupeVerdict(
          await ctx.store.get(storeKey),
          { key_mode: e.key_mode, received_at: e.received_at, request_id: e.request_id, dedupe: e.dedupe },
          deps.windowMs,
        );
        if (verdict.kind === 'duplicate') {
          outcomes.push(drop(verdict.reason));
          continue;
        }
        if (verdict.kind === 'first') await ctx.store.put(storeKey, verdict.next);
        outcomes.push(pass);
      }
      return outcomes;
    },
  };
}
