/**
 * Runs a stage on records the way the embedded runtime does (one transaction, the runtime's table store, the error
 * policy), but returns each record's outcome so tests can assert them one by one. `batchSize` splits the records
 * into batches (default: one batch of all of them). The identity-graph changes a batch emits are written to the
 * queryable tables in the same transaction (what the graph sink stage does a moment later in the runtimes).
 */
import type { Db } from '../../services/shared/db/db.js';
import { envelopeKey, type EventEnvelope } from '../../services/domain/envelope.js';
import { applyChanges } from '../../services/enrich/identity/graph-sink.js';
import type { GraphChanges } from '../../services/enrich/identity/graph-state.js';
import { Topics } from '../../services/shared/topics.js';
import type { InputRecord, Outcome, OutputRecord, Stage } from '../../services/stream/contract.js';
import { flushTableStore, tableStoreTransaction } from '../../services/stream/embedded/table-store.js';
import { processWithPolicy } from '../../services/stream/error-policy.js';
import { NoStore } from '../../services/stream/store.js';

let nextOffset = 1;

export async function processAll<S>(db: Db, stage: Stage<unknown, S>, values: readonly unknown[], opts: { batchSize?: number } = {}): Promise<Outcome[]> {
  const records: InputRecord<unknown>[] = values.map((value) => {
    const e = value as EventEnvelope;
    const key = typeof e?.workspace_id === 'string' ? envelopeKey(e) : 'bad';
    return { topic: stage.input, partition: 0, offset: String(nextOffset++), key, value, timestamp: Date.now() };
  });
  const size = opts.batchSize ?? Math.max(records.length, 1);
  const outcomes: Outcome[] = [];
  for (let i = 0; i < records.length; i += size) {
    const batch = records.slice(i, i + size);
    outcomes.push(
      ...(await db.transaction(async (tx) => {
        const store = stage.store ? tableStoreTransaction<S>(tx, stage.store.name) : new NoStore<S>();
        const emitted: OutputRecord[] = [];
        const out = await processWithPolicy(stage, batch, { sql: tx, store, now: Date.now, emitted });
        if (stage.store) await flushTableStore(tx, stage.store.name, store);
        const changes = emitted.filter((o) => o.topic === Topics.identityChanges).map((o) => o.value as GraphChanges);
        for (const c of changes) await applyChanges(tx, [c]);
        return out;
      })),
    );
  }
  return outcomes;
}

/** Outcome → a short label for table-driven assertions: `ok`, `ok:0` (no outputs), `drop:<reason>`, `dlq:<reason>`. */
export function label(o: Outcome): string {
  if (o.type === 'ok') return o.outputs.length === 1 ? 'ok' : `ok:${o.outputs.length}`;
  return `${o.type}:${o.reason}`;
}

export function outputValue<V>(o: Outcome): V {
  if (o.type !== 'ok' || o.outputs.length !== 1) throw new Error(`expected one output, got ${JSON.stringify(o)}`);
  return o.outputs[0]!.value as V;
}
