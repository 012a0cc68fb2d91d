/**
 * The Kafka runtime's RangeReader (stream/range.ts). Bounds come from the broker's offsets for a time
 * (ListOffsets by timestamp). A stage's outputs carry their input's timestamp (runner.ts), so a record of
 * events.deduped has the time its event was appended to events.raw, just after it was received; the bounds take a
 * minute more on each side and the caller filters on the receive time.
 *
 * Reading uses a throw-away consumer group of its own, positioned at the saved cursor and deleted afterwards: the
 * live groups' offsets are never moved, and the reader's own offsets mean nothing (the caller saves the cursor with
 * what each chunk produced). read_committed, like every stage.
 */
import { randomUUID } from 'node:crypto';
import type { KafkaAdmin } from '../../shared/kafka/admin.js';
import type { KafkaConnection } from '../../shared/kafka/client.js';
import { GroupConsumer, type ConsumedRecord } from '../../shared/kafka/consumer.js';
import { UndecodableRecordError, type AvroSerde } from '../../shared/kafka/serde.js';
import type { TopicName } from '../../shared/topics.js';
import type { InputRecord } from '../contract.js';
import type { Positions, RangeChunk, RangeReader, RangeReadOptions } from '../range.js';

/** How far a record's timestamp may lie from its event's receive time (the gateway's deadline, with room). */
const TIMESTAMP_SLACK_MS = 60_000;

export class KafkaRangeReader implements RangeReader {
  readonly runtime = 'kafka' as const;

  constructor(
    private readonly deps: { readonly connection: KafkaConnection; readonly admin: KafkaAdmin; readonly serde: AvroSerde },
  ) {}

  async bounds(topic: TopicName, fromMs: number, toMs: number): Promise<{ start: Positions; end: Positions }> {
    const [start, end] = await Promise.all([
      this.deps.admin.offsetsForTimes(topic, fromMs - TIMESTAMP_SLACK_MS),
      this.deps.admin.offsetsForTimes(topic, Math.min(toMs + TIMESTAMP_SLACK_MS, Date.now() + TIMESTAMP_SLACK_MS)),
    ]);
    const positions = (m: ReadonlyMap<number, bigint>): Positions => Object.fromEntries([...m].map(([p, o]) => [String(p), o.toString()]));
    return { start: positions(start), end: positions(end) };
  }

  async read(topic: TopicName, cursor: Positions, end: Positions, onChunk: (chunk: RangeChunk) => Promise<void>, opts: RangeReadOptions): Promise<void> {
    const endOf = (p: number): bigint => BigInt(end[String(p)] ?? '0');
    const at = new Map(Object.entries(end).map(([p, e]) => [Number(p), BigInt(cursor[p] ?? e)]));
    const pending = new Set([...at].filter(([p, c]) => c < endOf(p)).map(([p]) => p));
    if (pending.size === 0 || opts.signal.aborted) return;

    const { connection, admin } = this.deps;
    const groupId = connection.groupId(`replay-reader-${randomUUID()}`);
    // Every partition positioned (those already at their end too, or the group would read them from the start).
    await admin.setGroupOffsets(groupId, topic, at);

    let failed: Error | undefined;
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    const onAbort = (): void => finish();
    opts.signal.addEventListener('abort', onAbort, { once: true });
    // One chunk at a time, in order, whether it comes from a batch or from a position past the last data record.
    let chain = Promise.resolve();
    const serial = (work: () => Promise<void>): Promise<void> => {
      chain = chain.then(async () => {
        if (failed || opts.signal.aborted) return;
        try {
          await work();
        } catch (err) {
          failed = err as Error;
          finish();
        }
      });
      return chain;
    };
    const reached = (p: number, next: bigint): Promise<void> =>
      serial(async () => {
        if (!pending.has(p) || next < endOf(p)) return;
        // Transaction markers (never delivered) may lie between the last record and the end: the cursor goes to the end.
        if (at.get(p)! < endOf(p)) await onChunk({ partition: p, records: [], next: endOf(p).toString() });
        at.set(p, endOf(p));
        pending.delete(p);
        consumer.pause(topic, [p]);
        if (pending.size === 0) finish();
      });

    const consumer: GroupConsumer = new GroupConsumer(connection, {
      groupId,
      topics: [topic],
      partitionsConsumedConcurrently: 1,
      onAssigned: () => undefined,
      onBatch: async (batch) => {
        const p = batch.partition;
        const inRange = batch.records.filter((r) => r.offset < endOf(p));
        for (let i = 0; i < inRange.length; i += opts.chunkSize) {
          const slice = inRange.slice(i, i + opts.chunkSize);
          await serial(async () => {
            const records = await this.decode(topic, slice, opts.workspaceId);
            const next = slice.at(-1)!.offset + 1n;
            await onChunk({ partition: p, records, next: next.toString() });
            at.set(p, next);
          });
          if (failed || opts.signal.aborted) return;
          await batch.heartbeat();
        }
        const last = batch.records.at(-1);
        if (last) batch.resolve(last.offset);
        if (inRange.length < batch.records.length) await reached(p, endOf(p));
      },
      onPosition: (_topic, p, next) => void reached(p, next),
    });
    try {
      await consumer.start();
      await finished;
      await chain;
    } finally {
      opts.signal.removeEventListener('abort', onAbort);
      await consumer.stop();
      await admin.deleteGroups([groupId]);
    }
    if (failed) throw failed;
  }

  private async decode(topic: TopicName, records: readonly ConsumedRecord[], workspaceId: string | undefined): Promise<Array<InputRecord<unknown>>> {
    const out: Array<InputRecord<unknown>> = [];
    for (const r of records) {
      // Keys start with the workspace id (envelopeKey): other workspaces' records are skipped undecoded.
      if (workspaceId !== undefined && !r.key.startsWith(`${workspaceId}:`)) continue;
      if (r.value === null) continue;
      let value: unknown;
      try {
        value = await this.deps.serde.decode(topic, r.value);
      } catch (err) {
        if (!(err instanceof UndecodableRecordError)) throw err;
        value = { undecodable: err.message };
      }
      out.push({ topic, partition: r.partition, offset: r.offset.toString(), key: r.key, value, timestamp: r.timestamp });
    }
    return out;
  }
}
