/**
 * The Kafka runtime's driver for one processor (the same contract as the embedded runner): a member of consumer
 * group `<prefix><processor.name>` on the processor's input, read_committed.
 *
 * Exactly once, per KIP-447 (Kafka Streams' exactly_once_v2):
 *  - The member has ONE transactional producer (`<group>-<input>-<random id of this runner>`). A chunk of a batch of
 *    input partition p (outputs, dead letters, changelog records on p, the group's offset for p) goes in one
 *    transaction with the chunks of the member's other partitions that are ready at the same time, or not at all.
 *  - The offsets carry the member's group generation: once the group has moved on (p may be another member's now),
 *    the group's coordinator refuses them, and the transaction aborts. A zombie therefore never commits for p.
 *  - Chunks that produce nothing at all (no output, dead letter or changelog record: a stage whose work is all in its
 *    database) commit their offsets alone, in one OffsetCommit with the same generation, refused the same way.
 *  - Before any record of p is processed: the store of p is restored from the changelog up to its end (read_committed,
 *    so an earlier owner's transaction still open is waited for: ended by that owner, or aborted by its timeout), and
 *    the committed offset is read with requireStable (an offset of a transaction still open is waited for too). Only
 *    then is p resumed.
 *  - A failed transaction is aborted and the member rejoins: every partition is prepared again from committed state,
 *    as it is on every new generation, so no partial or stale in-memory state is ever processed. A transaction that
 *    failed because the generation moved on needs no rejoin: the new generation prepares every partition anyway.
 *  - A fetched batch is cut into chunks of one transaction each; chunk n+1 is processed while chunk n commits, reading
 *    chunk n's store writes through an overlay, and its transaction begins only after chunk n's committed. Its writes
 *    reach the store only then, so the store still holds committed state alone.
 * Poison records (a processor throwing MAX_ATTEMPTS times, output not fitting the schema, undecodable input) are
 * dead-lettered in the same transaction; an outage (database, registry, broker) is retried, never dead-lettered.
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '../../shared/db/db.js';
import type { KafkaAdmin } from '../../shared/kafka/admin.js';
import type { KafkaConnection } from '../../shared/kafka/client.js';
import { GroupConsumer, type Assignment, type ConsumedBatch, type ConsumedRecord } from '../../shared/kafka/consumer.js';
import { refusedForGeneration, TransactionalProducer, type GroupMember, type NextOffset, type OutgoingRecord } from '../../shared/kafka/producer.js';
import { AvroPacking, UndecodableRecordError, type AvroSerde } from './serde.js';
import { entryOfStageLetter, recordDeadLetters, type DeadLetter } from '../../domain/dead-letter.js';
import type { Logger } from '../../shared/logger.js';
import { sleep } from '../../shared/sleep.js';
import {
  consumerLag,
  setConsumerLag,
  kafkaProduceDuration,
  kafkaRebalances,
  stageBatchDuration,
  countStageRecords,
  type CountedOutcome,
  stateStorePurged,
  stateStoreRestored,
  stateStoreRestoreDuration,
} from '../../shared/metrics.js';
import { Topics, type TopicName } from '../../shared/topics.js';
import { deadLetterOf, type InputRecord, type Outcome, type OutputRecord, type Stage, type StageRunner } from '../contract.js';
import { OutageError, processWithPolicy } from '../error-policy.js';
import { HOT_ENTRIES, NoStore, PartitionStore, PendingOverlay, type PartitionStateStore, type StoreTransaction } from '../store.js';
import { BatchGate } from './batch-gate.js';

/**
 * Header on every record a stage writes: the consumer group (stage, with its prefix) that wrote it. Lineage for
 * operators when two deployments (prefixes) share a cluster, and how tests tell their stage's records apart.
 */
export const STAGE_GROUP_HEADER = 'stage-group';

export interface KafkaRunnerOptions {
  readonly logger: Logger;
  readonly now?: () => number;
  /**
   * Most records in one transaction (default 1,000: against 500, the drain's broker took half the CPU a record and the
   * drain ran ~20% faster; docs/decisions.md).
   */
  readonly maxBatchRecords?: number;
  /** Most bytes fetched of one partition at a time (default 1 MiB; larger batches only raised latency). */
  readonly fetchBytesPerPartition?: number;
  /** Partitions whose batches are processed at the same time (default 3). */
  readonly partitionsConsumedConcurrently?: number;
  /** How often consumer lag is read from the broker (default 10 s); batches update it too. */
  readonly lagIntervalMs?: number;
  /** Most expired store entries evicted (tombstoned) per transaction (default 1000). */
  readonly maxEvictionsPerBatch?: number;
}

export interface KafkaRunnerDeps<V, S> {
  readonly connection: KafkaConnection;
  readonly serde: AvroSerde;
  readonly admin: KafkaAdmin;
  /** Where ctx.sql's batch transactions are opened (contract.ts: committed just before the Kafka transaction). */
  readonly sql: Db;
  readonly processor: Stage<V, S>;
  readonly options: KafkaRunnerOptions;
}

interface PartitionTask<S> {
  readonly partition: number;
  readonly store: PartitionStateStore<S> | undefined;
  phase: 'preparing' | 'ready' | 'closed';
  /** Next changelog offset to apply (the store holds everything before it). */
  changelogPos: bigint;
  restoreTarget: bigint | undefined;
  restored: number;
  readonly assignedAt: number;
  onRestoreProgress?: () => void;
}

/** One input record of a chunk: decoded for the stage, or already judged (undecodable, empty). */
interface Decoded<V> {
  readonly record: ConsumedRecord;
  readonly input?: InputRecord<V>;
  readonly judged?: { readonly value: unknown; readonly outcome: Extract<Outcome, { type: 'dlq' }> };
}

/** A chunk processed and encoded, waiting for its Kafka transaction. */
interface Prepared<S> {
  readonly outputs: Map<TopicName, OutgoingRecord[]>;
  readonly tx: StoreTransaction<S>;
  /** The changelog records' values of the store's writes, by key (the store packs them when they turn cold). */
  readonly encoded: Map<string, Buffer> | undefined;
  /** What each record came to, for stage_records_total: an ok record's outputs are not kept (they are encoded). */
  readonly counts: readonly CountedOutcome[];
  /** The stage's outcomes, kept until the commit only for a stage that reads them then (afterCommit). */
  readonly processed: Outcome[] | undefined;
  readonly evicted: number;
  /** Offset of the chunk's last record. */
  readonly last: bigint;
  readonly highWatermark: bigint;
  /** Ends the chunk's stage_batch_duration timer. */
  readonly end: () => void;
}

/**
 * How long a transaction of this member may stay open before the broker aborts it: after a kill -9, the partitions it
 * wrote to are read (read_committed) past its records only then. Kafka Streams' exactly-once default; a chunk's
 * transaction takes ~0.1–0.2 s.
 */
const TRANSACTION_TIMEOUT_MS = 10_000;

const COUNTED_OK: CountedOutcome = { type: 'ok' };

/** Most records of a fetched batch in one chunk (one transaction), unless the options say otherwise. */
const DEFAULT_CHUNK_RECORDS = 1_000;

export class KafkaStageRunner<V, S> implements StageRunner {
  readonly stage: string;
  readonly groupId: string;
  private readonly headers: Readonly<Record<string, string>>;
  private readonly input: TopicName;
  private readonly changelog: TopicName | undefined;
  /**
   * The cold entries of the stores this runner makes packed in the changelog's schema (one packing: the runner's
   * partitions take turns); none when the stage brings a store of its own (processor.store.partitionStore).
   */
  private readonly packing: AvroPacking<S> | undefined;
  private readonly logger: Logger;
  private readonly now: () => number;
  private consumer: GroupConsumer | undefined;
  private tasks = new Map<number, PartitionTask<S>>();
  private stopping = false;
  private restarting: Promise<void> | undefined;
  private lagTimer: NodeJS.Timeout | undefined;
  private restartDelay = 500;
  private punctuateTimer: NodeJS.Timeout | undefined;
  private readonly gate = new BatchGate();
  /** The member's transactional producer's id: one per runner, the same across its rejoins (KIP-447). */
  private readonly transactionalId: string;
  private producer: TransactionalProducer | undefined;
  /** The generation the member's offsets are committed in (set on every assignment). */
  private member: GroupMember | undefined;
  /** Chunks waiting for the next transaction, and the transaction under way. */
  private queued: Array<{ readonly partition: number; readonly chunk: Prepared<S>; readonly done: (err?: unknown) => void }> = [];
  private committing: Promise<void> | undefined;

  constructor(private readonly deps: KafkaRunnerDeps<V, S>) {
    const { processor, connection, options } = deps;
    this.stage = processor.name;
    this.groupId = connection.groupId(processor.name);
    this.headers = { [STAGE_GROUP_HEADER]: this.groupId };
    this.input = processor.input;
    this.changelog = processor.store?.changelog;
    const store = processor.store;
    this.packing = store && !store.partitionStore ? new AvroPacking<S>(store.changelog) : undefined;
    this.logger = options.logger.child({ stage: processor.name, group: this.groupId });
    this.now = options.now ?? Date.now;
    this.transactionalId = `${this.groupId}-${this.input}-${randomUUID()}`;
  }

  /** Joins the group; resolves once the consumer runs (partitions are prepared in the background). */
  async start(): Promise<void> {
    this.stopping = false;
    await this.deps.processor.init?.({ sql: this.deps.sql, logger: this.logger });
    await this.startConsumer();
    const every = this.deps.options.lagIntervalMs ?? 10_000;
    this.lagTimer = setInterval(() => void this.refreshLag().catch(() => undefined), every);
    this.lagTimer.unref();
    const p = this.deps.processor.punctuate;
    if (p) {
      // Housekeeping between batches, never during one (contract.ts).
      this.punctuateTimer = setInterval(
        () => void this.gate.alone(() => p.run(this.deps.sql, this.now())).catch((err) => this.logger.warn({ err }, 'punctuator failed')),
        p.everyMs,
      );
      this.punctuateTimer.unref();
    }
  }

  /** Finishes the batches in flight, leaves the group, closes the producers. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearInterval(this.lagTimer);
    clearInterval(this.punctuateTimer);
    await this.restarting;
    await this.consumer?.stop();
    this.consumer = undefined;
    await this.closeTasks();
    await this.deps.processor.close?.();
  }

  /** Partitions this member owns and has prepared (tests, diagnostics). */
  readyPartitions(): number[] {
    return [...this.tasks.values()].filter((t) => t.phase === 'ready').map((t) => t.partition);
  }

  private async startConsumer(): Promise<void> {
    const consumer = new GroupConsumer(this.deps.connection, {
      groupId: this.groupId,
      topics: this.changelog ? [this.input, this.changelog] : [this.input],
      coPartitioned: this.changelog !== undefined,
      partitionsConsumedConcurrently: this.deps.options.partitionsConsumedConcurrently ?? 3,
      maxBytesPerPartition: this.deps.options.fetchBytesPerPartition ?? 1024 * 1024,
      minBytes: this.deps.processor.gather?.minBytes,
      maxWaitMs: this.deps.processor.gather?.maxWaitMs,
      onAssigned: (assignment, memberId) => this.onAssigned(assignment, memberId),
      onBatch: (batch) => this.onBatch(batch),
      onPosition: (topic, partition, next) => {
        if (topic === this.changelog) this.advanceRestore(partition, next);
      },
      onCrash: (err) => this.logger.warn({ err }, 'consumer crashed; it rejoins the group'),
    });
    this.consumer = consumer;
    await consumer.start();
  }

  // ---- assignment: fence, restore, re-read the committed offset, resume ---------------------------------------

  private onAssigned(assignment: Assignment, member: GroupMember): void {
    kafkaRebalances.inc({ group: this.groupId });
    const partitions = [...(assignment.get(this.input) ?? [])].sort((a, b) => a - b);
    this.logger.info({ member: member.memberId, generation: member.generationId, partitions }, 'partitions assigned');
    this.member = member;
    const previous = this.tasks;
    this.tasks = new Map();
    for (const t of previous.values()) {
      t.phase = 'closed';
      t.onRestoreProgress?.();
      if (!partitions.includes(t.partition)) consumerLag.remove({ stage: this.deps.processor.name, topic: this.input, partition: String(t.partition) });
    }
    const store = this.deps.processor.store;
    for (const p of partitions) {
      this.tasks.set(p, {
        partition: p,
        store: store ? (store.partitionStore?.() ?? new PartitionStore<S>({ ms: store.retentionMs, byPrefix: store.retentionByPrefix }, HOT_ENTRIES, this.packing!)) : undefined,
        phase: 'preparing',
        changelogPos: 0n,
        restoreTarget: undefined,
        restored: 0,
        assignedAt: Date.now(),
      });
    }
    // Nothing of an input partition is processed before it is prepared; its changelog partition is read meanwhile.
    this.consumer?.pause(this.input, partitions);
    if (this.changelog) this.consumer?.resume(this.changelog, partitions);
    for (const task of this.tasks.values()) void this.prepare(task);
  }

  private async prepare(task: PartitionTask<S>): Promise<void> {
    let delay = 200;
    while (task.phase === 'preparing' && !this.stopping) {
      try {
        if (task.store && this.changelog) {
          const end = (await this.deps.admin.endOffsets(this.changelog)).get(task.partition);
          if (!end) throw new Error(`changelog ${this.changelog} has no partition ${task.partition} (co-partitioning broken)`);
          if (task.changelogPos < end.low) task.changelogPos = end.low;
          task.restoreTarget = end.high;
          await this.restored(task);
          if (task.phase !== 'preparing') return;
        }
        const committed = (await this.deps.admin.committedOffsets(this.groupId, this.input)).get(task.partition) ?? null;
        if (task.phase !== 'preparing') return;
        if (committed !== null) this.consumer?.seek(this.input, task.partition, committed);
        if (this.changelog) this.consumer?.pause(this.changelog, [task.partition]);
        task.phase = 'ready';
        this.consumer?.resume(this.input, [task.partition]);
        if (task.store) {
          stateStoreRestoreDuration.observe({ store: this.deps.processor.store!.name }, (Date.now() - task.assignedAt) / 1000);
        }
        this.logger.debug({ partition: task.partition, restored: task.restored, entries: task.store?.size, committed: committed?.toString() }, 'partition ready');
        return;
      } catch (err) {
        if (task.phase !== 'preparing') return;
        this.logger.warn({ err, partition: task.partition }, 'preparing partition failed; retrying');
        await sleep(delay);
        delay = Math.min(delay * 2, 5_000);
      }
    }
  }

  /** Resolves once the store holds the changelog up to its target (or the task was closed). */
  private restored(task: PartitionTask<S>): Promise<void> {
    return new Promise((resolve) => {
      const check = (): void => {
        if (task.phase !== 'preparing' || (task.restoreTarget !== undefined && task.changelogPos >= task.restoreTarget)) {
          task.onRestoreProgress = undefined;
          resolve();
        }
      };
      task.onRestoreProgress = check;
      check();
    });
  }

  private advanceRestore(partition: number, next: bigint): void {
    const task = this.tasks.get(partition);
    if (!task || task.phase !== 'preparing') return;
    if (next > task.changelogPos) task.changelogPos = next;
    task.onRestoreProgress?.();
  }

  private async restoreBatch(batch: ConsumedBatch): Promise<void> {
    const task = this.tasks.get(batch.partition);
    const last = batch.records.at(-1);
    // NOTE: a changelog batch of a ready partition holds this member's own writes (fetched just before the pause):
    // the store has them already, and applying them late could undo a newer write. Skip it.
    if (task && task.phase === 'preparing' && task.store && !batch.isStale()) {
      const now = this.now();
      const before = task.restored;
      for (const r of batch.records) {
        if (r.offset < task.changelogPos) continue;
        // Only what this stage (group) wrote is its state: another deployment on the cluster (another group prefix)
        // may share the changelog topic.
        if (r.headers[STAGE_GROUP_HEADER] !== this.groupId) continue;
        task.store.restore(r.key, await this.decodeState(r), r.timestamp, now);
        task.restored++;
      }
      stateStoreRestored.inc({ store: this.deps.processor.store!.name }, task.restored - before);
    }
    if (last) {
      batch.resolve(last.offset);
      this.advanceRestore(batch.partition, last.offset + 1n);
    }
  }

  private async decodeState(r: ConsumedRecord): Promise<S | null> {
    if (r.value === null) return null;
    try {
      return (await this.deps.serde.decode(this.changelog!, r.value)) as S;
    } catch (err) {
      if (!(err instanceof UndecodableRecordError)) throw err;
      // A state record nobody can read is no state: the key counts as absent (logged; never written by this runtime).
      this.logger.error({ err, key: r.key, offset: r.offset.toString() }, 'undecodable changelog record skipped');
      return null;
    }
  }

  // ---- processing ------------------------------------------------------------------------------------------------

  private async onBatch(batch: ConsumedBatch): Promise<void> {
    if (batch.topic === this.changelog) return this.restoreBatch(batch);
    const task = this.tasks.get(batch.partition);
    // Not prepared yet (or being replaced): the records are fetched again once the partition is resumed.
    if (!task || task.phase !== 'ready' || this.restarting || this.stopping || batch.isStale()) return;
    await this.gate.batch(() => this.runChunks(task, batch));
  }

  /**
   * The batch's chunks, each one transaction, in order. Chunk n+1 is processed while chunk n's transaction commits:
   * its store reads see chunk n's writes (PendingOverlay), and its transaction starts only once chunk n's committed.
   * Every path out waits for the transaction in flight, so a batch's work ends with its handler (rebalances, stop()).
   */
  private async runChunks(task: PartitionTask<S>, batch: ConsumedBatch): Promise<void> {
    const size = this.deps.options.maxBatchRecords ?? DEFAULT_CHUNK_RECORDS;
    const live = (): boolean => task.phase === 'ready' && !this.restarting && batch.isRunning();
    let inFlight: { readonly chunk: Prepared<S>; readonly committed: Promise<boolean> } | undefined;
    /** Waits for the chunk in flight; false when its transaction failed (the member is rejoining). */
    const settle = async (): Promise<boolean> => {
      if (!inFlight) return true;
      const { chunk, committed } = inFlight;
      inFlight = undefined;
      if (!(await committed)) return false;
      batch.resolve(chunk.last);
      return true;
    };
    try {
      for (let i = 0; i < batch.records.length; i += size) {
        if (!live()) return;
        const records = batch.records.slice(i, i + size);
        const overlay = inFlight && task.store ? new PendingOverlay(task.store, inFlight.chunk.tx, inFlight.chunk.evicted) : undefined;
        let chunk: Prepared<S>;
        try {
          chunk = await this.prepareChunk(task, records, batch.highWatermark, overlay);
        } catch (err) {
          if (!(await settle())) return;
          if (err instanceof OutageError) {
            // Nothing of this chunk was sent: it is fetched and processed again after a pause.
            this.logger.warn({ err, partition: task.partition }, 'batch postponed');
            await sleep(500);
            return;
          }
          this.logger.error({ err, partition: task.partition }, 'preparing a chunk failed; rejoining the group');
          this.restart();
          return;
        }
        if (!(await settle())) return;
        // The chunk before this one is in the store now (or this one reads the committed store already).
        overlay?.settle();
        // NOTE: a chunk prepared but not committed leaves only its database writes, which a stage must make idempotent
        // (contract.ts): whoever owns the partition next processes the chunk again.
        if (!live()) return;
        inFlight = { chunk, committed: this.commitPrepared(task, chunk, live) };
        if (i + size < batch.records.length) {
          try {
            await batch.heartbeat();
          } catch {
            return; // the group is rebalancing: the rest of the batch goes to whoever gets the partition
          }
        }
      }
    } finally {
      await settle();
    }
  }

  /**
   * Processes a chunk: the stage's database transaction (committed here, before the Kafka transaction: contract.ts),
   * the outputs, dead letters and state changes encoded, ready for ONE Kafka transaction.
   */
  private async prepareChunk(
    task: PartitionTask<S>,
    chunk: readonly ConsumedRecord[],
    highWatermark: bigint,
    overlay: PendingOverlay<S> | undefined,
  ): Promise<Prepared<S>> {
    const { processor, serde } = this.deps;
    const end = stageBatchDuration.startTimer({ stage: processor.name });
    const decoded = await Promise.all(chunk.map((r) => this.decode(task, r)));
    const inputs = decoded.flatMap((d) => (d.input ? [d.input] : []));
    const tx = overlay?.begin() ?? task.store?.begin() ?? new NoStore<S>();
    const outputs = new Map<TopicName, OutgoingRecord[]>();
    const push = (topic: TopicName, record: OutgoingRecord): void => {
      const list = outputs.get(topic);
      if (list) list.push(record);
      else outputs.set(topic, [record]);
    };
    const counts: CountedOutcome[] = [];
    let processed: Outcome[];
    try {
      processed = await this.deps.sql.transaction(async (sql) => {
        const emitted: OutputRecord[] = [];
        const outcomes = await processWithPolicy(processor, inputs, {
          sql,
          store: tx,
          now: this.now,
          emitted,
          onFailure: (err, size) => this.logger.warn({ err, partition: task.partition, size }, 'batch attempt failed; bisecting'),
        });
        // The outputs are encoded inside the transaction: a record whose output does not fit its schema is a dead
        // letter, and every dead letter's queryable row (domain/dead-letter.ts) commits with the batch's writes.
        const letters: DeadLetter[] = [];
        let next = 0;
        for (const d of decoded) {
          let outcome: Outcome;
          let value: unknown;
          if (d.judged) {
            outcome = d.judged.outcome;
            value = d.judged.value;
          } else {
            outcome = outcomes[next++]!;
            value = d.input!.value;
          }
          if (outcome.type === 'ok') {
            try {
              // An input passed on unchanged (dedupe) keeps its bytes when the output's schema is the one it was
              // written with.
              const bytesOf = (o: OutputRecord): Buffer =>
                o.value === value && d.record.value !== null && serde.writtenWith(d.record.value, o.topic) ? d.record.value : serde.encode(o.topic, o.value);
              const encoded = outcome.outputs.map((o) => ({ topic: o.topic, record: { key: o.key, value: bytesOf(o), headers: this.headers, timestamp: d.record.timestamp } }));
              for (const e of encoded) push(e.topic, e.record);
            } catch (err) {
              // NOTE: the record's state writes stay (they describe what was seen); its output goes to the dead letters.
              outcome = { type: 'dlq', reason: 'unencodable_output', error: (err as Error).message };
            }
          }
          if (outcome.type === 'dlq') {
            const letter = this.deadLetter(task, d.record, value, outcome);
            letters.push(letter.letter);
            push(Topics.eventsDlq, letter.record);
          }
          // A chunk waiting for its commit holds as little as it can: the live data it holds is what every
          // scavenge of the next chunk's allocations copies (docs/decisions.md).
          counts.push(outcome.type === 'ok' ? COUNTED_OK : outcome);
        }
        // A batch output that does not fit its schema is a bug of the stage, not of a record: the chunk fails and waits.
        const timestamp = chunk.at(-1)!.timestamp;
        for (const o of emitted) push(o.topic, { key: o.key, value: serde.encode(o.topic, o.value), headers: this.headers, timestamp });
        await recordDeadLetters(sql, letters.map(entryOfStageLetter));
        return outcomes;
      });
    } catch (err) {
      // An outage, or the database transaction could not commit: nothing was sent, the chunk waits and comes again.
      throw err instanceof OutageError ? err : new OutageError(`database: ${(err as Error).message}`, { cause: err });
    }

    let evicted = 0;
    let encoded: Map<string, Buffer> | undefined;
    if (task.store) {
      const max = this.deps.options.maxEvictionsPerBatch ?? 1_000;
      // The chunk still committing tombstoned the oldest keys already (the store has them until it is applied): they
      // are asked for beyond the limit, so they do not take this chunk's share.
      for (const key of task.store.expired(this.now(), max + (overlay?.pendingEvictions ?? 0))) {
        if (evicted >= max) break;
        // Written again by this chunk, or by the chunk still committing.
        if (tx.has(key) || overlay?.wrote(key)) continue;
        tx.delete(key);
        evicted++;
      }
      const changes: OutgoingRecord[] = [];
      // Only a store packed by this runner takes its writes' changelog values (a stage's own store does not).
      encoded = this.packing ? new Map() : undefined;
      for (const [key, value] of tx.changes()) {
        const bytes = value === null ? null : serde.encode(this.changelog!, value);
        if (bytes) encoded?.set(key, bytes);
        changes.push({ key, value: bytes, partition: task.partition, headers: this.headers });
      }
      if (changes.length > 0) outputs.set(this.changelog!, changes);
    }
    return { outputs, tx, encoded, counts, processed: processor.afterCommit ? processed : undefined, evicted, last: chunk.at(-1)!.offset, highWatermark, end };
  }

  /**
   * A prepared chunk's outputs, dead letters, state changes and offset, committed in the member's next transaction
   * (transact); then its writes go into the store. False when it failed: the member rejoins (unless the generation
   * moved on, which prepares every partition again anyway).
   */
  private async commitPrepared(task: PartitionTask<S>, c: Prepared<S>, live: () => boolean): Promise<boolean> {
    const { processor } = this.deps;
    try {
      await this.transact(task.partition, c);
    } catch (err) {
      // The group moved on (the rebalance not seen here yet, or its offsets refused for their generation): the member
      // rejoins through its heartbeat and the new generation prepares every partition again. Leaving the group as
      // well would force one more rebalance, whose new generation refuses the other members' commits in turn.
      if (!live() || refusedForGeneration(err)) {
        this.logger.info({ err, partition: task.partition }, 'a transaction of an older generation failed; the new one prepares the partition again');
        return false;
      }
      this.logger.error({ err, partition: task.partition }, 'transaction failed; rejoining the group');
      this.restart();
      return false;
    }
    if (task.store) task.store.apply(c.tx, this.now(), c.encoded);
    c.end();
    countStageRecords(processor.name, c.counts);
    if (c.evicted > 0) stateStorePurged.inc({ store: processor.store!.name }, c.evicted);
    setConsumerLag(processor.name, this.input, task.partition, c.highWatermark, c.last + 1n);
    if (c.processed) processor.afterCommit?.(c.processed);
    return true;
  }

  /**
   * Resolves once `chunk` is committed in one of the member's transactions, together with the chunks of its other
   * partitions that were ready meanwhile (one transaction at a time; a partition has at most one chunk waiting).
   */
  private transact(partition: number, chunk: Prepared<S>): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queued.push({ partition, chunk, done: (err) => (err === undefined ? resolve() : reject(err)) });
      this.committing ??= this.commitQueued().finally(() => {
        this.committing = undefined;
      });
    });
  }

  private async commitQueued(): Promise<void> {
    while (this.queued.length > 0) {
      // The chunks of other partitions that finish preparing in this turn of the event loop join this transaction.
      await new Promise((r) => setImmediate(r));
      const group = this.queued;
      this.queued = [];
      let failure: unknown;
      try {
        const member = this.member;
        if (!member) throw new Error('no group generation to commit offsets in');
        const offsets = group.map(({ partition, chunk }) => ({ partition, next: chunk.last + 1n }));
        if (group.every(({ chunk }) => chunk.outputs.size === 0)) {
          // Nothing to produce (a stage whose effects are all in its database, e.g. the forwarder's intake): the
          // offsets alone, in one OffsetCommit for the member's generation, fenced as a transactional one is. A
          // transaction would cost the broker its markers and log writes for no record (docs/decisions.md).
          const consumer = this.consumer;
          if (!consumer) throw new Error('no consumer to commit offsets with');
          await consumer.commitOffsets(member, this.input, offsets);
        } else {
          await this.commitInTransaction(group, offsets, member);
        }
      } catch (err) {
        failure = err;
      }
      for (const q of group) q.done(failure);
    }
  }

  /** The group's outputs and offsets in one transaction of the member's producer. */
  private async commitInTransaction(group: ReadonlyArray<{ chunk: Prepared<S> }>, offsets: readonly NextOffset[], member: GroupMember): Promise<void> {
    this.producer ??= new TransactionalProducer(this.deps.connection, this.transactionalId, { transactionTimeoutMs: TRANSACTION_TIMEOUT_MS });
    const producer = this.producer;
    try {
      await producer.init();
      const produced = kafkaProduceDuration.startTimer({ producer: this.deps.processor.name });
      await producer.run(async (t) => {
        const outputs = new Map<TopicName, OutgoingRecord[]>();
        for (const { chunk } of group) {
          for (const [topic, records] of chunk.outputs) {
            const list = outputs.get(topic);
            if (list) list.push(...records);
            else outputs.set(topic, [...records]);
          }
        }
        await t.send([...outputs].map(([topic, records]) => ({ topic, records })));
        await t.sendOffsets(this.groupId, this.input, offsets, member);
      });
      produced();
    } catch (err) {
      // A failed transaction leaves its producer unusable: the next one starts with InitProducerId again (same id).
      this.producer = undefined;
      await producer.close();
      throw err;
    }
  }

  /** One record decoded for the stage, or judged already (empty or undecodable: dead letters). */
  private async decode(task: PartitionTask<S>, record: ConsumedRecord): Promise<Decoded<V>> {
    if (record.value === null) return { record, judged: { value: null, outcome: { type: 'dlq', reason: 'empty_value' } } };
    let value: unknown;
    try {
      value = await this.deps.serde.decode(this.input, record.value);
    } catch (err) {
      if (err instanceof UndecodableRecordError) {
        const raw = { undecodable_base64: record.value.toString('base64') };
        return { record, judged: { value: raw, outcome: { type: 'dlq', reason: 'undecodable', error: err.message } } };
      }
      throw new OutageError(`schema registry: ${(err as Error).message}`);
    }
    return {
      record,
      input: {
        topic: this.input,
        partition: task.partition,
        offset: record.offset.toString(),
        key: record.key,
        value: value as V,
        timestamp: record.timestamp,
      },
    };
  }

  private deadLetter(
    task: PartitionTask<S>,
    record: ConsumedRecord,
    value: unknown,
    outcome: Extract<Outcome, { type: 'dlq' }>,
  ): { letter: DeadLetter; record: OutgoingRecord } {
    const at = { topic: this.input, partition: task.partition, offset: record.offset.toString(), key: record.key };
    const letter = deadLetterOf(this.deps.processor.name, at, value, outcome, this.now());
    return { letter, record: { key: record.key, value: this.deps.serde.encode(Topics.eventsDlq, letter), headers: this.headers } };
  }

  // ---- failures, lag, shutdown -----------------------------------------------------------------------------------

  /** Leaves the group and joins again: every partition is prepared again from the committed state. */
  private restart(): void {
    if (this.restarting || this.stopping) return;
    this.restarting = (async () => {
      // The current fetch round (this batch included) must end before the consumer can stop: not awaited here.
      await sleep(0);
      try {
        await this.consumer?.stop();
      } catch (err) {
        this.logger.warn({ err }, 'leaving the group failed');
      }
      this.consumer = undefined;
      await this.closeTasks();
      while (!this.stopping) {
        await sleep(this.restartDelay);
        try {
          await this.startConsumer();
          this.restartDelay = 500;
          break;
        } catch (err) {
          this.restartDelay = Math.min(this.restartDelay * 2, 5_000);
          this.logger.warn({ err }, 'rejoining the group failed; retrying');
          const failed = this.consumer as GroupConsumer | undefined;
          this.consumer = undefined;
          await failed?.stop().catch(() => undefined);
        }
      }
    })().finally(() => {
      this.restarting = undefined;
    });
  }

  private async closeTasks(): Promise<void> {
    const tasks = [...this.tasks.values()];
    this.tasks = new Map();
    for (const t of tasks) {
      t.phase = 'closed';
      t.onRestoreProgress?.();
    }
    await this.committing;
    const producer = this.producer;
    this.producer = undefined;
    await producer?.close();
  }

  /** Lag of the owned partitions from the broker: end offset minus the group's committed offset. */
  private async refreshLag(): Promise<void> {
    const owned = [...this.tasks.values()].filter((t) => t.phase === 'ready').map((t) => t.partition);
    if (owned.length === 0) return;
    const [ends, committed] = await Promise.all([
      this.deps.admin.endOffsets(this.input),
      this.deps.admin.committedOffsets(this.groupId, this.input),
    ]);
    for (const p of owned) {
      const end = ends.get(p);
      if (!end) continue;
      const at = committed.get(p) ?? end.low;
      setConsumerLag(this.deps.processor.name, this.input, p, end.high, at);
    }
  }
}
