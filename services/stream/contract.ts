/**
 * What a stage is, independent of the runtime that drives it. A processor takes one input record plus its state
 * and returns an outcome; it knows nothing of Kafka or of the embedded log. The runtimes (embedded-runner.ts, and
 * the Kafka runtime) own reading, state stores, the atomic commit of outputs + state + offset, and dead-lettering.
 */
import type { Sql } from '../shared/db/db.js';
import type { TopicName } from '../shared/topics.js';
import type { PartitionStateStore } from './store.js';

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

/**
 * A keyed state store owned by the runtime (e.g. dedupe's first-seen markers). Writes become visible to later
 * gets at once and are committed atomically with the outputs and the input offset. On Kafka the store is
 * restored from its compacted changelog topic; embedded, it is a table in the same transaction.
 */
export interface KeyValueStore<V> {
  get(key: string): Promise<V | undefined>;
  put(key: string, value: V): Promise<void>;
}

export interface StageContext {
  /** SQL inside the stage's transaction (embedded) or on the pool (Kafka; writes there must be idempotent). */
  readonly sql: Sql;
  /**
   * Runs fn in one transaction: the stage's own (embedded), or a new one on the pool (Kafka). For state that is
   * read and then written (the identity graph), so that consumers of different partitions cannot interleave.
   */
  readonly atomically: <T>(fn: (sql: Sql) => Promise<T>) => Promise<T>;
  readonly now: () => number;
}

export interface Processor<V, S = never> {
  /** Stage name: the consumer group and the metrics label. */
  readonly name: string;
  readonly input: TopicName;
  /**
   * Name of the stage's state store, when it has one (its changelog topic on Kafka). `retentionMs`: entries not
   * written for that long are purged by the runtime (embedded: rows of state_store; Kafka: evicted and tombstoned),
   * which bounds the store; the processor must already treat such entries as absent.
   */
  readonly store?: {
    readonly name: string;
    readonly changelog: TopicName;
    readonly retentionMs?: number;
    /**
     * On Kafka: a compact in-memory store for one partition, instead of the generic map (see kafka-store.ts).
     * Such a store may evict without tombstones; its changelog topic then needs delete retention (topics.ts).
     */
    readonly partitionStore?: () => PartitionStateStore<S>;
  };
  process(record: InputRecord<V>, ctx: StageContext & { readonly store: KeyValueStore<S> }): Promise<Outcome>;
}

/** The dead-letter record every runtime writes for a record a stage could not process. */
export interface DeadLetter {
  readonly stage: string;
  readonly reason: string;
  readonly error: string | null;
  readonly source_topic: string;
  readonly source_partition: number;
  readonly source_offset: string;
  readonly key: string;
  readonly value: unknown;
  readonly failed_at: number;
}
