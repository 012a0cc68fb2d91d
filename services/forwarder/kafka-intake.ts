/**
 * The forwarder's intake on the Kafka runtime: the same decisions as intake.ts (planIntake: queue, park, drop as
 * already sent or disconnected, dead-letter the unreadable), driven by a Kafka consumer of conversions.ready in
 * group `<prefix>forwarder` instead of the embedded log.
 *
 * Exactly once without a Kafka transaction: per batch, ONE Postgres transaction files the conversions into the
 * outbox (INSERT … ON CONFLICT (workspace_id, event_id) DO NOTHING, after checking the sent ledger) and appends the
 * dead letters to the database's conversions.dlq log; only after it committed is the Kafka offset committed. A crash
 * in between replays the batch, and the replay changes nothing: queued conversions conflict, sent ones are in the
 * ledger. (Dead letters of a replayed batch may be appended twice; the relay forwards them to Kafka's
 * conversions.dlq, see kafka-dlq-relay.ts.)
 */
import type { Db } from '../shared/db/db.js';
import type { KafkaConnection } from '../shared/kafka/client.js';
import { GroupConsumer, type ConsumedBatch } from '../shared/kafka/consumer.js';
import { UndecodableRecordError, type AvroSerde } from '../shared/kafka/serde.js';
import type { Logger } from '../shared/logger.js';
import { kafkaRebalances, setConsumerLag, stageBatchDuration } from '../shared/metrics.js';
import { Topics } from '../shared/topics.js';
import { INTAKE_GROUP } from './intake.js';
import { forwardedConversions } from './metrics.js';
import { fileIntoOutbox, type IntakeCount } from './outbox-filing.js';


interface Decoded {
  readonly key: string;
  readonly offset: bigint;
  /** The conversion, or why it cannot be read. */
  readonly value: unknown;
  readonly undecodable?: string;
}

export class KafkaConversionIntake {
  private consumer: GroupConsumer | undefined;
  readonly groupId: string;

  constructor(
    private readonly deps: {
      readonly connection: KafkaConnection;
      readonly serde: AvroSerde;
      readonly db: Db;
      readonly logger: Logger;
      /** Called after each committed batch that queued something (wakes the sender). */
      readonly onQueued?: () => void;
      readonly now?: () => number;
    },
  ) {
    this.groupId = deps.connection.groupId(INTAKE_GROUP);
  }

  async start(): Promise<void> {
    this.consumer = new GroupConsumer(this.deps.connection, {
      groupId: this.groupId,
      topics: [Topics.conversionsReady],
      onAssigned: (assignment) => {
        kafkaRebalances.inc({ group: this.groupId });
        this.deps.logger.info({ partitions: assignment.get(Topics.conversionsReady) ?? [] }, 'forwarder intake: partitions assigned');
      },
      onBatch: (batch) => this.onBatch(batch),
      onCrash: (err) => this.deps.logger.warn({ err: err.message }, 'forwarder intake consumer crashed; it rejoins the group'),
    });
    await this.consumer.start();
  }

  async stop(): Promise<void> {
    await this.consumer?.stop();
    this.consumer = undefined;
  }

  private async onBatch(batch: ConsumedBatch): Promise<void> {
    if (batch.records.length === 0 || batch.isStale()) return;
    const end = stageBatchDuration.startTimer({ stage: INTAKE_GROUP });
    try {
      const decoded: Decoded[] = [];
      for (const r of batch.records) {
        if (r.value === null) {
          decoded.push({ key: r.key, offset: r.offset, value: null, undecodable: 'empty value' });
          continue;
        }
        try {
          decoded.push({ key: r.key, offset: r.offset, value: await this.deps.serde.decode(Topics.conversionsReady, r.value) });
        } catch (err) {
          if (!(err instanceof UndecodableRecordError)) throw err;
          decoded.push({ key: r.key, offset: r.offset, value: { undecodable_base64: r.value.toString('base64') }, undecodable: err.message });
        }
      }
      const queued = await this.file(batch.partition, decoded);
      const last = batch.records.at(-1)!.offset;
      await this.consumer!.commit(Topics.conversionsReady, batch.partition, last + 1n);
      batch.resolve(last);
      end();
      setConsumerLag(INTAKE_GROUP, Topics.conversionsReady, batch.partition, batch.highWatermark, last + 1n);
      if (queued > 0) this.deps.onQueued?.();
    } catch (err) {
      // Nothing is resolved: the batch is fetched again (the filing is idempotent).
      this.deps.logger.warn({ err: (err as Error).message, partition: batch.partition }, 'forwarder intake batch failed; retrying');
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  /** Files one batch into the outbox in one database transaction. Returns how many conversions it queued. */
  private async file(partition: number, batch: readonly Decoded[]): Promise<number> {
    const now = (this.deps.now ?? Date.now)();
    const counted: IntakeCount[] = [];
    let queued = 0;
    await this.deps.db.transaction(async (tx) => {
      const filed = await fileIntoOutbox(
        tx,
        batch.map((r) => ({
          key: r.key,
          value: r.value,
          position: `partition ${partition} offset ${r.offset}`,
          undecodable: r.undecodable,
        })),
        now,
      );
      counted.push(...filed.counted);
      queued = filed.queued;
    });
    for (const c of counted) forwardedConversions.inc({ outcome: c.outcome, code: c.code });
    return queued;
  }
}
