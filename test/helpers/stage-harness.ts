/**
 * Runs a processor on records the way the embedded runtime does (one transaction, the runtime's table store), but
 * returns each record's outcome so tests can assert them one by one.
 */
import type { Db } from '../../services/shared/db/db.js';
import { envelopeKey, type EventEnvelope } from '../../services/shared/envelope.js';
import { tableStore } from '../../services/stream/embedded/runner.js';
import type { KeyValueStore, Outcome, Processor } from '../../services/stream/contract.js';

let nextOffset = 1;

const noStore: KeyValueStore<never> = {
  get: () => Promise.reject(new Error('no store')),
  put: () => Promise.reject(new Error('no store')),
};

export async function processAll<S>(db: Db, processor: Processor<unknown, S>, values: readonly unknown[]): Promise<Outcome[]> {
  return db.transaction(async (tx) => {
    const store = processor.store ? tableStore<S>(tx, processor.store.name) : (noStore as KeyValueStore<S>);
    const outcomes: Outcome[] = [];
    for (const value of values) {
      const e = value as EventEnvelope;
      const key = typeof e?.workspace_id === 'string' ? envelopeKey(e) : 'bad';
      outcomes.push(
        await processor.process(
          { topic: processor.input, partition: 0, offset: String(nextOffset++), key, value, timestamp: Date.now() },
          { sql: tx, store, now: Date.now, atomically: (fn) => fn(tx) },
        ),
      );
    }
    return outcomes;
  });
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
