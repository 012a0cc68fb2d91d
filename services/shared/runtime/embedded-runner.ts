/**
 * The embedded runtime's consumer loop for one processor: read after the stage's committed offset, run the
 * processor on each record, then write outputs, dead letters, state changes and the new offset in ONE
 * transaction. A crash at any instant either commits all of a batch or none of it, so nothing is lost and nothing
 * is processed twice. A batch whose transaction fails is retried record by record; a record that fails alone
 * MAX_ATTEMPTS times is dead-lettered so the stage moves on (error policy: continue with DLQ).
 */
import type { Db, Sql } from '../db/db.js';
import type { Logger } from '../logger.js';
import { stageBatchDuration, stageRecords, stateStorePurged } from '../metrics.js';
import { Topics, type TopicName } from '../topics.js';
import { EmbeddedConsumerLoop } from './embedded-loop.js';
import { commitOffset, committedOffset } from './embedded-offsets.js';
import { appendInTransaction, type EmbeddedLog, type StoredRecord } from './embedded-log.js';
import type { ProducedRecord } from './log.js';
import type { DeadLetter, InputRecord, KeyValueStore, Outcome, Processor } from './types.js';

const MAX_ATTEMPTS = 3;

/** A KeyValueStore over the state_store table, inside the stage's transaction. */
export function tableStore<S>(sql: Sql, store: string): KeyValueStore<S> {
  return {
    async get(key) {
      const r = await sql.query<{ value: S }>('SELECT value FROM state_store WHERE store = $1 AND key = $2', [store, key]);
      return r.rows[0]?.value;
    },
    async put(key, value) {
      await sql.query(
        `INSERT INTO state_store (store, key, value, updated_at) VALUES ($1, $2, $3::jsonb, now())
         ON CONFLICT (store, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()`,
        [store, key, JSON.stringify(value)],
      );
    },
  };
}

/**
 * Deletes entries of a store not written for `retentionMs` (bounded storage for windowed stores such as dedupe's).
 * In chunks, so one purge never holds a long transaction over a large table.
 */
export async function purgeStore(db: Sql, store: string, retentionMs: number, chunk = 5_000): Promise<number> {
  let total = 0;
  for (;;) {
    const r = await db.query<{ key: string }>(
      `DELETE FROM state_store WHERE store = $1 AND key IN (
         SELECT key FROM state_store WHERE store = $1 AND updated_at < now() - $2::double precision * interval '1 millisecond'
         LIMIT $3)
       RETURNING key`,
      [store, retentionMs, chunk],
    );
    total += r.rows.length;
    if (r.rows.length < chunk) return total;
  }
}

export interface RunnerOptions {
  readonly batchSize?: number;
  /**
   * Longest a batch's transaction may run before it commits what it has (default 50 ms). The embedded store
   * serialises transactions, so a long stage batch would hold back the gateway's appends past their 1.5 s deadline.
   */
  readonly maxBatchMs?: number;
  readonly idleWaitMs?: number;
  /** How often the runner purges expired entries of the stage's store (when it declares retentionMs). */
  readonly purgeIntervalMs?: number;
  readonly logger: Logger;
  readonly now?: () => number;
}

export class EmbeddedStageRunner<V, S> {
  private offset: number | undefined;
  private lastPurge = 0;
  private readonly loop: EmbeddedConsumerLoop;

  constructor(
    private readonly db: Db,
    private readonly log: EmbeddedLog,
    private readonly processor: Processor<V, S>,
    private readonly opts: RunnerOptions,
  ) {
    this.loop = new EmbeddedConsumerLoop({
      log,
      topic: processor.input,
      step: () => this.step(),
      between: () => this.purgeIfDue(),
      idleWaitMs: opts.idleWaitMs,
      onError: (err) => opts.logger.error({ err, stage: processor.name }, 'stage batch failed; retrying'),
    });
  }

  start(): void {
    this.loop.start();
  }

  /** Finishes the batch in flight, then stops. */
  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Processes until the input is drained (tests and shutdown). Returns the number of records handled. */
  drain(): Promise<number> {
    return this.loop.drain();
  }

  /** Purges the store between batches (never concurrently with one), at most every purgeIntervalMs. */
  private async purgeIfDue(): Promise<void> {
    const store = this.processor.store;
    if (!store?.retentionMs) return;
    const now = Date.now();
    if (now - this.lastPurge < (this.opts.purgeIntervalMs ?? 5 * 60_000)) return;
    this.lastPurge = now;
    const n = await purgeStore(this.db, store.name, store.retentionMs);
    if (n > 0) stateStorePurged.inc({ store: store.name }, n);
  }

  private async committedOffset(): Promise<number> {
    if (this.offset === undefined) {
      this.offset = await committedOffset(this.db, this.processor.name, this.processor.input);
    }
    return this.offset;
  }

  /** One batch. Returns how many input records it consumed. */
  async step(): Promise<number> {
    const from = await this.committedOffset();
    const batch = await this.log.read<V>(this.processor.input, from, this.opts.batchSize ?? 500);
    // Lag on the embedded runtime is read from the database at scrape time (shared/metrics-scrape.ts).
    if (batch.length === 0) return 0;
    const end = stageBatchDuration.startTimer({ stage: this.processor.name });
    let consumed: number;
    try {
      consumed = await this.commitBatch(batch, this.opts.maxBatchMs ?? 50);
    } catch (err) {
      this.opts.logger.warn({ err, stage: this.processor.name, size: batch.length }, 'batch failed; retrying one by one');
      for (const record of batch) await this.commitAlone(record);
      consumed = batch.length;
    }
    end();
    return consumed;
  }

  private async commitAlone(record: StoredRecord<V>): Promise<void> {
    let lastError: unknown;
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      try {
        await this.commitBatch([record]);
        return;
      } catch (err) {
        lastError = err;
      }
    }
    // NOTE: a record is poison only if the store works. When the database itself fails, dead-lettering would throw
    // good records away; rethrow instead so the loop backs off and retries from the same offset.
    await this.db.query('SELECT 1');
    // Poison record: dead-letter it with its offset, in one transaction, and move on.
    const outcome: Outcome = { type: 'dlq', reason: 'processing_failed', error: (lastError as Error)?.message };
    await this.db.transaction(async (tx) => {
      await appendInTransaction(tx, new Map([[Topics.eventsDlq, [this.deadLetter(record, outcome)]]]));
      await this.saveOffset(tx, record.offset);
    });
    this.offset = record.offset;
    stageRecords.inc({ stage: this.processor.name, outcome: 'dlq', reason: 'processing_failed' });
  }

  /** Processes a prefix of the batch (all of it, or as much as fits in maxMs) and commits it. Returns its length. */
  private async commitBatch(batch: readonly StoredRecord<V>[], maxMs = Infinity): Promise<number> {
    const counts: Array<[Outcome['type'], string]> = [];
    const started = Date.now();
    let last = batch[0]!.offset;
    await this.db.transaction(async (tx) => {
      const outputs = new Map<TopicName, ProducedRecord[]>();
      const push = (topic: TopicName, r: ProducedRecord): void => {
        const list = outputs.get(topic);
        if (list) list.push(r);
        else outputs.set(topic, [r]);
      };
      const store = this.processor.store ? tableStore<S>(tx, this.processor.store.name) : noStore<S>();
      // Already one transaction: the batch's.
      const ctx = { sql: tx, store, now: this.opts.now ?? Date.now, atomically: <T>(fn: (sql: Sql) => Promise<T>) => fn(tx) };
      for (const stored of batch) {
        const input: InputRecord<V> = {
          topic: this.processor.input,
          partition: 0,
          offset: String(stored.offset),
          key: stored.key,
          value: stored.value,
          timestamp: stored.appendedAt,
        };
        // A throw aborts the whole transaction; step() then retries record by record to find the poison one.
        const outcome = await this.processor.process(input, ctx);
        if (outcome.type === 'ok') for (const o of outcome.outputs) push(o.topic, { key: o.key, value: o.value });
        else if (outcome.type === 'dlq') push(Topics.eventsDlq, this.deadLetter(stored, outcome));
        counts.push([outcome.type, outcome.type === 'ok' ? '' : outcome.reason]);
        last = stored.offset;
        if (Date.now() - started >= maxMs) break;
      }
      await appendInTransaction(tx, outputs);
      await this.saveOffset(tx, last);
    });
    this.offset = last;
    for (const [outcome, reason] of counts) stageRecords.inc({ stage: this.processor.name, outcome, reason });
    this.notifyDownstream();
    return counts.length;
  }

  private notifyDownstream(): void {
    // Wake consumers of every topic: cheap, and stages need not know who reads their outputs.
    for (const t of Object.values(Topics)) this.log.appended.emit('append', t);
  }

  private async saveOffset(tx: Sql, offset: number): Promise<void> {
    await commitOffset(tx, this.processor.name, this.processor.input, offset);
  }

  private deadLetter(record: StoredRecord<V>, outcome: Extract<Outcome, { type: 'dlq' }>): ProducedRecord<DeadLetter> {
    return {
      key: record.key,
      value: {
        stage: this.processor.name,
        reason: outcome.reason,
        error: outcome.error ?? null,
        source_topic: this.processor.input,
        source_partition: 0,
        source_offset: String(record.offset),
        key: record.key,
        value: record.value,
        failed_at: (this.opts.now ?? Date.now)(),
      },
    };
  }
}

function noStore<S>(): KeyValueStore<S> {
  return {
    get: () => Promise.reject(new Error('this stage has no state store')),
    put: () => Promise.reject(new Error('this stage has no state store')),
  };
}
