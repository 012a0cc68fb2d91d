/**
 * Runs a stage on records the way the embedded runtime does (one transaction, the runtime's table store, the error
 * policy; an `ahead` stage's batch processed before its transaction), but returns each record's outcome so tests can assert them one by one. `batchSize` splits the records
 * into batches (default: one batch of all of them). The identity-graph changes a batch emits are written to the
 * queryable tables in the same transaction (what the graph sink stage does a moment later in the runtimes).
 */
import type { Db, Sql } from '../../services/shared/db/db.js';
import { envelopeKey, type EventEnvelope } from '../../services/domain/envelope.js';
import { applyChanges } from '../../services/enrich/identity/graph-sink.js';
import type { GraphChanges } from '../../services/enrich/identity/graph-state.js';
import { Topics } from '../../services/shared/topics.js';
import type { InputRecord, Outcome, OutputRecord, Stage } from '../../services/stream/contract.js';
import { flushTableStore, tableStoreTransaction } from '../../services/stream/embedded/table-store.js';
import { processAhead, processWithPolicy } from '../../services/stream/error-policy.js';
import { NoStore, type StoreTransaction } from '../../services/stream/store.js';

let nextOffset = 1;

export async function processAll<S>(db: Db, stage: Stage<unknown, S>, values: readonly unknown[], opts: { batchSize?: number } = {}): Promise<Outcome[]> {
  const records: InputRecord<unknown>[] = values.map((value) => {
    const e = value as EventEnvelope;
    const key = typeof e?.workspace_id === 'string' ? envelopeKey(e) : 'bad';
    return { topic: stage.input, partition: 0, offset: String(nextOffset++), key, value, timestamp: Date.now() };
  });
  const size = opts.batchSize ?? Math.max(records.length, 1);
  const outcomes: Outcome[] = [];
  const storeOf = (sql: Sql) => (stage.store ? tableStoreTransaction<S>(sql, stage.store.name) : new NoStore<S>());
  const commit = async (tx: Sql, store: StoreTransaction<S>, emitted: readonly OutputRecord[]): Promise<void> => {
    if (stage.store) await flushTableStore(tx, stage.store.name, store);
    const changes = emitted.filter((o) => o.topic === Topics.identityChanges).map((o) => o.value as GraphChanges);
    for (const c of changes) await applyChanges(tx, [c]);
  };
  for (let i = 0; i < records.length; i += size) {
    const batch = records.slice(i, i + size);
    // An `ahead` stage's batch processed before its transaction, as embedded/runner.ts does (again inside one when
    // that fails).
    const ahead = stage.ahead
      ? await (async () => {
          const store = storeOf(db);
          const done = await processAhead(stage, batch, { sql: db, store, now: Date.now });
          return db.transaction(async (tx) => {
            for (const w of done.writes) await w(tx);
            await commit(tx, store, done.emitted);
            return done.outcomes;
          });
        })().catch(() => undefined)
      : undefined;
    outcomes.push(
      ...(ahead ??
        (await db.transaction(async (tx) => {
          const store = storeOf(tx);
          const emitted: OutputRecord[] = [];
          const out = await processWithPolicy(stage, batch, { sql: tx, store, now: Date.now, emitted });
          await commit(tx, store, emitted);
          return out;
        }))),
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
