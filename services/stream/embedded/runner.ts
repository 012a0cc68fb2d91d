/**
 * The embedded runtime's driver for one stage: read a batch after the stage's committed offset, run it under the
 * error policy, then write outputs, dead letters, state changes and the new offset in ONE transaction, which starts
 * with a lock on the stage so two processes on one Postgres never run it at once. An `ahead` stage's batch is read and
 * processed before that transaction, which then only checks and writes (contract.ts).
 * PGlite serialises transactions and the gateway's appends wait behind a batch, so the batch size adapts to take
 * about `maxBatchMs`, which keeps the gateway inside its deadline.
 */
import type { Db, Sql } from '../../shared/db/db.js';
import { entryOfStageLetter, recordDeadLetters, type DeadLetter } from '../../domain/dead-letter.js';
import type { Logger } from '../../shared/logger.js';
import { consumerLag, stageBatchDuration, countStageRecords, stateStorePurged } from '../../shared/metrics.js';
import { Topics, type TopicName } from '../../shared/topics.js';
import { deadLetterOf, StaleBatchError, type InputRecord, type Outcome, type OutputRecord, type Stage, type StageRunner } from '../contract.js';
import { processAhead, processWithPolicy, type BatchRun } from '../error-policy.js';
import { NoStore, type StoreTransaction } from '../store.js';
import { appendInTransaction, type EmbeddedLog, type LogAppend, type StoredRecord } from './log.js';
import { EmbeddedConsumerLoop, type Step } from './loop.js';
import { commitOffset, committedOffset } from './offsets.js';
import { flushTableStore, purgeStoreRetention, TableStoreCache } from './table-store.js';

/** Advisory lock class of embedded stage batches (the second key is the stage's name). */
const STAGE_LOCK_CLASS = 7_312_405;

/** Until the transaction ends, no other process runs the stage (two processes on one Postgres). */
const lockStage = (tx: Sql, stage: string) => tx.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [STAGE_LOCK_CLASS, stage]);

/** The smallest batch the size adapts down to: below it a batch's fixed statements cost more than its records. */
const MIN_BATCH = 100;
/** The largest batch when the runner's options name none: the size adapts below it to maxBatchMs. */
const DEFAULT_BATCH = 1_000;

/** A committed batch, as the runner goes on from it. */
interface Committed<S> {
  readonly outcomes: readonly Outcome[];
  readonly store: StoreTransaction<S>;
  readonly offset: number;
  readonly appendedTo: readonly TopicName[];
  readonly drained: boolean;
}

export interface RunnerOptions {
  /** Most records in one batch (default DEFAULT_BATCH). */
  readonly batchSize?: number;
  /** Target duration of one batch (default 250 ms; an `ahead` stage's processing included): the batch size adapts to it. */
  readonly maxBatchMs?: number;
  readonly idleWaitMs?: number;
  /** How often the runner purges expired entries of the stage's store (when it declares retentionMs). */
  readonly purgeIntervalMs?: number;
  readonly logger: Logger;
  readonly now?: () => number;
}

export class EmbeddedStageRunner<V, S> implements StageRunner {
  readonly stage: string;
  private lastPurge = 0;
  private lastPunctuate = 0;
  private size: number;
  private readonly loop: EmbeddedConsumerLoop;
  private readonly now: () => number;
  private initialised = false;
  /**
   * The stage's committed offset as this runner last read it under the stage's lock or committed it: the state its
   * store cache describes, and where an `ahead` batch reads after.
   */
  private offset: number | undefined;
  /** The stage's store rows this runner has read or written at `offset` (table-store.ts). */
  private readonly storeCache: TableStoreCache<S> | undefined;

  constructor(
    private readonly db: Db,
    private readonly log: EmbeddedLog,
    private readonly processor: Stage<V, S>,
    private readonly opts: RunnerOptions,
  ) {
    this.stage = processor.name;
    this.now = opts.now ?? Date.now;
    this.size = opts.batchSize ?? DEFAULT_BATCH;
    this.storeCache = processor.store ? new TableStoreCache<S>(processor.store.name) : undefined;
    this.loop = new EmbeddedConsumerLoop({
      log,
      topic: processor.input,
      step: () => this.batch(),
      between: () => this.housekeeping(),
      idleWaitMs: opts.idleWaitMs,
      onError: (err) => opts.logger.error({ err, stage: processor.name }, 'stage batch failed; retrying'),
    });
  }

  async start(): Promise<void> {
    await this.init();
    this.loop.start();
  }

  /** Finishes the batch in flight, then stops. */
  async stop(): Promise<void> {
    await this.loop.stop();
    await this.processor.close?.();
  }

  /** Processes until the input is drained (tests and shutdown). Returns the number of records handled. */
  async drain(): Promise<number> {
    await this.init();
    return this.loop.drain();
  }

  private async init(): Promise<void> {
    if (this.initialised) return;
    await this.processor.init?.({ sql: this.db, logger: this.opts.logger });
    this.initialised = true;
  }

  /** Between batches (never concurrently with one): the store's retention and the stage's punctuator, when due. */
  private async housekeeping(): Promise<void> {
    const now = this.now();
    const store = this.processor.store;
    if ((store?.retentionMs || store?.retentionByPrefix) && now - this.lastPurge >= (this.opts.purgeIntervalMs ?? 5 * 60_000)) {
      this.lastPurge = now;
      const n = await purgeStoreRetention(this.db, store, (keys) => this.storeCache?.forget(keys));
      if (n > 0) stateStorePurged.inc({ store: store.name }, n);
    }
    const p = this.processor.punctuate;
    if (p && now - this.lastPunctuate >= p.everyMs) {
      this.lastPunctuate = now;
      await p.run(this.db, now);
    }
  }

  /** One batch. Returns how many input records it consumed. */
  async step(): Promise<number> {
    return (await this.batch()).consumed;
  }

  /** One batch: what it consumed, and whether it read fewer records than it asked for (loop.ts). */
  private async batch(): Promise<Step> {
    const { processor } = this;
    const started = performance.now();
    const end = stageBatchDuration.startTimer({ stage: processor.name });
    const result = processor.ahead ? await this.aheadOfTransaction() : await this.inTransaction();
    if (!result) {
      consumerLag.set({ stage: processor.name, topic: processor.input, partition: '0' }, 0);
      return { consumed: 0, drained: true };
    }
    end();
    this.offset = result.offset;
    this.storeCache?.committed(result.store);
    const { outcomes } = result;
    this.adapt(performance.now() - started, outcomes.length);
    countStageRecords(processor.name, outcomes);
    this.notifyDownstream(result.appendedTo);
    processor.afterCommit?.(outcomes);
    return { consumed: outcomes.length, drained: result.drained };
  }

  /** The batch read, processed under the error policy and committed in ONE transaction. */
  private inTransaction(): Promise<Committed<S> | undefined> {
    const { processor } = this;
    return this.db.transaction(async (tx) => {
      await lockStage(tx, processor.name);
      const from = await committedOffset(tx, processor.name, processor.input);
      // Another process committed the stage since this runner last did (two processes on one Postgres): what the
      // cache holds may be older than the table.
      if (from !== this.offset) this.storeCache?.clear();
      this.offset = from;
      const batch = await this.log.read<V>(processor.input, from, this.size, tx);
      if (batch.length === 0) return undefined;
      const store = this.storeCache?.transaction(tx) ?? new NoStore<S>();
      const records = batch.map((r) => this.inputOf(r));
      const emitted: OutputRecord[] = [];
      const outcomes = await processWithPolicy(processor, records, {
        sql: tx,
        store,
        now: this.now,
        emitted,
        onFailure: (err, size) => this.opts.logger.warn({ err, stage: processor.name, size }, 'batch attempt failed; bisecting'),
      });
      return this.write(tx, batch, records, { outcomes, emitted }, store);
    });
  }

  /**
   * An `ahead` stage's batch (contract.ts): read and processed holding no transaction, so the store's connection
   * serves the gateway and the other stages meanwhile, then committed in a short transaction that first checks, under
   * the stage's lock, that no other process committed the stage since it was read. A batch that failed, or whose
   * reads no longer hold (StaleBatchError), is processed again inside its transaction.
   */
  private async aheadOfTransaction(): Promise<Committed<S> | undefined> {
    const { processor } = this;
    // Where this runner last found or left the stage: the check under the lock below tells whether it still is.
    const from = this.offset ?? (await committedOffset(this.db, processor.name, processor.input));
    const batch = await this.log.read<V>(processor.input, from, this.size);
    if (batch.length === 0) return undefined;
    const store = this.storeCache?.transaction(this.db) ?? new NoStore<S>();
    const records = batch.map((r) => this.inputOf(r));
    try {
      const ahead = await processAhead(processor, records, { sql: this.db, store, now: this.now });
      return await this.db.transaction(async (tx) => {
        await lockStage(tx, processor.name);
        if ((await committedOffset(tx, processor.name, processor.input)) !== from) throw new StaleBatchError(`stage ${processor.name} was committed by another process`);
        for (const w of ahead.writes) await w(tx);
        return this.write(tx, batch, records, ahead, store);
      });
    } catch (err) {
      if (!(err instanceof StaleBatchError)) this.opts.logger.warn({ err, stage: processor.name }, 'batch failed ahead of its transaction; processing it in one');
      return this.inTransaction();
    }
  }

  /**
   * A batch's outputs, dead letters, state and offset, in its transaction. They are sent without waiting for one
   * another (their order does not matter inside the transaction): the store runs the first while the next ones' rows
   * are serialised here. The queryable copy of the batch's dead letters (domain/dead-letter.ts) is among them.
   */
  private async write(
    tx: Sql,
    batch: readonly StoredRecord<V>[],
    records: readonly InputRecord<V>[],
    { outcomes, emitted }: Pick<BatchRun, 'outcomes' | 'emitted'>,
    store: StoreTransaction<S>,
  ): Promise<Committed<S>> {
    const { processor } = this;
    const outputs = this.outputsOf(records, outcomes, emitted);
    const letters = (outputs.get(Topics.eventsDlq) ?? []).map((r) => entryOfStageLetter(r.value as DeadLetter));
    await Promise.all([
      recordDeadLetters(tx, letters),
      appendInTransaction(tx, outputs),
      processor.store ? flushTableStore(tx, processor.store.name, store) : undefined,
      commitOffset(tx, processor.name, processor.input, batch.at(-1)!.offset),
    ]);
    return { outcomes, store, offset: batch.at(-1)!.offset, appendedTo: [...outputs.keys()], drained: batch.length < this.size };
  }

  /**
   * Moves the next batch's size halfway towards the size that would have taken maxBatchMs at this batch's pace. Only
   * full batches say something about the pace (a drained input gives short batches); the floor keeps a slow machine
   * from shrinking batches until their fixed statements dominate.
   */
  private adapt(elapsedMs: number, records: number): void {
    if (records < this.size) return;
    const max = this.opts.batchSize ?? DEFAULT_BATCH;
    const suggested = Math.floor((this.size * (this.opts.maxBatchMs ?? 250)) / Math.max(elapsedMs, 1));
    this.size = Math.max(Math.min(MIN_BATCH, max), Math.min(max, Math.round((this.size + suggested) / 2)));
  }

  private inputOf(stored: StoredRecord<V>): InputRecord<V> {
    return {
      topic: this.processor.input,
      partition: 0,
      offset: String(stored.offset),
      key: stored.key,
      value: stored.value,
      timestamp: stored.appendedAt,
    };
  }

  private outputsOf(records: readonly InputRecord<V>[], outcomes: readonly Outcome[], emitted: readonly OutputRecord[]): Map<TopicName, LogAppend[]> {
    const outputs = new Map<TopicName, LogAppend[]>();
    const push = (topic: TopicName, r: LogAppend): void => {
      const list = outputs.get(topic);
      if (list) list.push(r);
      else outputs.set(topic, [r]);
    };
    outcomes.forEach((o, i) => {
      const record = records[i]!;
      // An input passed on unchanged (dedupe; contract.ts: never mutated) is copied by the store from its own row.
      const sameAs = { topic: this.processor.input, offset: Number(record.offset) };
      if (o.type === 'ok') for (const out of o.outputs) push(out.topic, out.value === record.value ? { key: out.key, value: out.value, sameAs } : { key: out.key, value: out.value });
      else if (o.type === 'dlq') push(Topics.eventsDlq, { key: record.key, value: deadLetterOf(this.processor.name, record, record.value, o, this.now()) });
    });
    for (const out of emitted) push(out.topic, { key: out.key, value: out.value });
    return outputs;
  }

  /**
   * Wakes the consumers of the topics the batch appended to (the stage need not know who reads them). Waking every
   * topic's made each consumer with nothing new run an empty batch (a transaction, its lock and two reads) after
   * every other stage's batch.
   */
  private notifyDownstream(topics: readonly TopicName[]): void {
    for (const t of topics) this.log.announce(t);
  }
}


