/**
 * What a stage is, independent of the runtime that drives it: the batch-first processor contract.
 *
 * A stage takes a BATCH of input records from one partition, with its state, and returns ONE outcome per record, in
 * order (`ok` with outputs, `drop` with a reason, `dlq` with the error). Database work is set-based for the whole
 * batch, never a round trip per record; `perRecord()` adapts a stage that needs no database.
 * The runtimes own reading, the state store, the atomic commit and the error policy (error-policy.ts).
 *
 * `ctx.sql` is ONE database transaction for the batch on both runtimes, committed no later than the input position.
 * On Kafka a crash between that commit and the Kafka transaction processes the batch again (and the batch after it,
 * prepared while it committed), so a stage's writes must be idempotent and its outputs the same when it meets its own
 * earlier writes.
 *
 * A stage that writes only through its store, `ctx.emit` and `ctx.write` may declare `ahead`: the embedded runtime
 * then processes its batch BEFORE the batch's transaction, without holding the store's one connection, and commits
 * what it produced in a short transaction after (the stage's offset checked unchanged under its lock, the writes of
 * `ctx.write`, the outputs, the state). `ctx.sql` is then the database outside any transaction (reads only, each
 * statement its own snapshot; `ctx.inTransaction` false), so a read that a later write relies on must be checked again
 * by that write, which throws StaleBatchError when it no longer holds: the batch is then processed again inside its
 * transaction, as a stage without `ahead` always is.
 */
import type { Sql } from '../shared/db/db.js';
import type { Logger } from '../shared/logger.js';
import type { TopicName } from '../shared/topics.js';
import type { DeadLetter } from '../domain/dead-letter.js';
import type { KeyValueStore, PartitionStateStore } from './store.js';

export type { DeadLetter, KeyValueStore };

export interface InputRecord<V> {
  readonly topic: TopicName;
  readonly partition: number;
  /** Position in the topic/partition; opaque to processors. */
  readonly offset: string;
  readonly key: string;
  readonly value: V;
  /** Epoch ms when the record was appended. */
  readonly timestamp: number;
}

export interface OutputRecord {
  readonly topic: TopicName;
  readonly key: string;
  /** The input's own value object, unchanged (never mutate an input), lets a runtime pass on its bytes. */
  readonly value: unknown;
}

/** Per-record outcome: values, not exceptions. The runtime counts, logs and dead-letters. */
export type Outcome =
  | { readonly type: 'ok'; readonly outputs: readonly OutputRecord[] }
  | { readonly type: 'drop'; readonly reason: string }
  | { readonly type: 'dlq'; readonly reason: string; readonly error?: string };

export const ok = (...outputs: OutputRecord[]): Outcome => ({ type: 'ok', outputs });
export const drop = (reason: string): Outcome => ({ type: 'drop', reason });
export const dlq = (reason: string, error?: unknown): Outcome => ({
  type: 'dlq',
  reason,
  error: error === undefined ? undefined : error instanceof Error ? error.message : String(error),
});

/** A database write a batch hands to its runtime (BatchContext.write). */
export type BatchWrite = (sql: Sql) => Promise<void>;

export interface BatchContext<S> {
  /**
   * The batch's database transaction (see the module comment: the same meaning on both runtimes), but while the
   * embedded runtime processes an `ahead` stage's batch before its transaction: the database, outside any transaction.
   */
  readonly sql: Sql;
  readonly store: KeyValueStore<S>;
  readonly now: () => number;
  /**
   * False only while the embedded runtime processes an `ahead` stage's batch before its transaction (`sql` is then
   * the database outside any transaction); true on Kafka and in every other batch.
   */
  readonly inTransaction: boolean;
  /**
   * A database write of the batch, run in the batch's transaction after `processBatch` returned, in the order given:
   * committed atomically with the batch's outcomes, dropped with an attempt that throws. It may throw StaleBatchError
   * when it ran ahead (`inTransaction` false); inside the transaction the batch's reads are the transaction's own, and
   * a throw is a failure of the batch like any other (error-policy.ts).
   */
  write(run: BatchWrite): void;
  /**
   * An output of the batch as a whole rather than of one record (e.g. enrich's identity-graph changes, one record a
   * batch): committed atomically with the batch's outcomes, dropped with an attempt that throws.
   */
  emit(output: OutputRecord): void;
}

export interface StoreSpec<S> {
  readonly name: string;
  /** The store's changelog topic (Kafka); the embedded runtime keeps the store in a table instead. */
  readonly changelog: TopicName;
  /**
   * Entries not written for that long are purged by the runtime (embedded: rows of state_store; Kafka: evicted and
   * tombstoned), which bounds the store; the stage must already treat such entries as absent.
   */
  readonly retentionMs?: number;
  /** Other retentions for the keys that start with the given prefixes (e.g. short-lived identifiers). */
  readonly retentionByPrefix?: Readonly<Record<string, number>>;
  /**
   * An in-memory store for one partition better suited to this stage than the generic map (store.ts), used where the
   * runtime keeps state in memory (Kafka). Such a store may evict without tombstones: its changelog then needs delete
   * retention (topics.ts).
   */
  readonly partitionStore?: () => PartitionStateStore<S>;
}

/** Housekeeping the runtime runs between batches, never concurrently with one (e.g. purges of expired rows). */
export interface Punctuator {
  readonly everyMs: number;
  run(sql: Sql, now: number): Promise<void>;
}

export interface Stage<V, S = never> {
  /** Stage name: the consumer group and the metrics label. */
  readonly name: string;
  readonly input: TopicName;
  readonly store?: StoreSpec<S>;
  /**
   * Records worth waiting for: a stage whose cost is per statement rather than per record (the graph sink, whose
   * batch of change records becomes one upsert per table) lets the Kafka runtime's broker hold a fetch until this
   * many bytes are there or this long has passed, so that its batches are larger. Default: fetches answer at once.
   */
  readonly gather?: { readonly minBytes: number; readonly maxWaitMs: number };
  /**
   * The stage writes only through its store, `ctx.emit` and `ctx.write`: the embedded runtime may process its batches
   * before their transactions (module comment). Without it, `ctx.sql` is always the batch's transaction.
   */
  readonly ahead?: boolean;
  /** Once, before the first batch (warm caches, check the database). */
  init?(deps: { readonly sql: Sql; readonly logger: Logger }): Promise<void>;
  /** One outcome per record, in order. Throwing means "this batch could not be processed" (error-policy.ts). */
  processBatch(records: readonly InputRecord<V>[], ctx: BatchContext<S>): Promise<Outcome[]>;
  readonly punctuate?: Punctuator;
  /** After a batch committed (e.g. wake a consumer of the stage's database writes). */
  afterCommit?(outcomes: readonly Outcome[]): void;
  /** Once, when the runtime stops the stage. */
  close?(): Promise<void>;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyStage = Stage<any, any>;

/** A stage written record by record: for stages whose per-record work is in memory (the store, pure functions). */
export interface RecordStage<V, S = never> extends Omit<Stage<V, S>, 'processBatch'> {
  process(record: InputRecord<V>, ctx: BatchContext<S>): Promise<Outcome>;
}

/** Adapts a record stage to the batch contract: its records in order, each seeing the writes of those before it. */
export function perRecord<V, S = never>(stage: RecordStage<V, S>): Stage<V, S> {
  const { process, ...rest } = stage;
  return {
    ...rest,
    async processBatch(records, ctx) {
      const outcomes: Outcome[] = [];
      for (const r of records) outcomes.push(await process(r, ctx));
      return outcomes;
    },
  };
}

export function deadLetterOf(
  stage: string,
  record: Pick<InputRecord<unknown>, 'topic' | 'partition' | 'offset' | 'key'>,
  value: unknown,
  outcome: Extract<Outcome, { type: 'dlq' }>,
  now: number,
): DeadLetter {
  return {
    stage,
    reason: outcome.reason,
    error: outcome.error ?? null,
    source_topic: record.topic,
    source_partition: record.partition,
    source_offset: record.offset,
    key: record.key,
    value,
    failed_at: now,
  };
}

/**
 * Thrown by a `ctx.write` when what the batch read before its transaction no longer holds (e.g. an erasure committed
 * in between): the runtime drops what the batch produced and processes it again inside its transaction.
 */
export class StaleBatchError extends Error {}

/** How a runtime drives one stage. */
export interface StageRunner {
  readonly stage: string;
  start(): void | Promise<void>;
  stop(): Promise<void>;
}
