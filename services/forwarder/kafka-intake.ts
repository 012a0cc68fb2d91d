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
import type { ConversionReady } from '../shared/conversion.js';
import type { Db } from '../shared/db/db.js';
import type { KafkaConnection } from '../shared/kafka/client.js';
import { GroupConsumer, type ConsumedBatch } from '../shared/kafka/consumer.js';
import { UndecodableRecordError, type AvroSerde } from '../shared/kafka/serde.js';
import type { Logger } from '../shared/logger.js';
import { consumerLag, kafkaRebalances, stageBatchDuration } from '../shared/metrics.js';
import { appendInTransaction } from '../shared/runtime/embedded-log.js';
import { Topics } from '../shared/topics.js';
import type { ConnectionStatus } from './connection-repo.js';
import { conversionProblem, INTAKE_GROUP, planIntake } from './intake.js';
import { forwardedConversions } from './metrics.js';
import type { ConversionDeadLetter } from './outbox-repo.js';

interface Counted {
  workspace: string;
  outcome: 'parked' | 'dropped' | 'dead_lettered';
  code: string;
}

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
      const lag = batch.highWatermark - (last + 1n);
      consumerLag.set({ stage: INTAKE_GROUP, topic: Topics.conversionsReady, partition: String(batch.partition) }, Number(lag > 0n ? lag : 0n));
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
    const counted: Counted[] = [];
    let queued = 0;
    await this.deps.db.transaction(async (tx) => {
      const readable = batch.filter((r) => !r.undecodable && conversionProblem(r.value) === null).map((r) => r.value as ConversionReady);
      const workspaces = [...new Set(readable.map((c) => c.workspace_id))];
      const statuses = new Map<string, ConnectionStatus>();
      if (workspaces.length > 0) {
        const s = await tx.query<{ workspace_id: string; status: ConnectionStatus }>(
          'SELECT workspace_id, status FROM connections WHERE workspace_id = ANY($1::text[])',
          [workspaces],
        );
        for (const row of s.rows) statuses.set(row.workspace_id, row.status);
      }
      const sent = new Set<string>();
      if (readable.length > 0) {
        const s = await tx.query<{ workspace_id: string; event_id: string }>(
          `SELECT s.workspace_id, s.event_id FROM forward_sent s
           JOIN unnest($1::text[], $2::text[]) AS t(w, e) ON s.workspace_id = t.w AND s.event_id = t.e`,
          [readable.map((c) => c.workspace_id), readable.map((c) => c.event_id)],
        );
        for (const row of s.rows) sent.add(`${row.workspace_id}\n${row.event_id}`);
      }

      const toQueue: Array<{ c: ConversionReady; parked: boolean }> = [];
      const letters: Array<{ key: string; value: ConversionDeadLetter }> = [];
      for (const r of batch) {
        const v = (r.value ?? {}) as Partial<ConversionReady>;
        const ws = typeof v.workspace_id === 'string' ? v.workspace_id : '';
        const decision = r.undecodable
          ? ({ action: 'dlq', reason: `undecodable: ${r.undecodable}` } as const)
          : planIntake(r.value, statuses.get(ws), sent.has(`${ws}\n${String(v.event_id)}`));
        if (decision.action === 'queue') toQueue.push({ c: r.value as ConversionReady, parked: decision.parked });
        else if (decision.action === 'drop') counted.push({ workspace: ws, outcome: 'dropped', code: decision.reason });
        else {
          letters.push({ key: r.key, value: invalidLetter(r, partition, decision.reason, now) });
          counted.push({ workspace: ws || 'unknown', outcome: 'dead_lettered', code: 'invalid_conversion' });
        }
      }

      if (toQueue.length > 0) {
        const ins = await tx.query<{ workspace_id: string; event_id: string }>(
          `INSERT INTO forward_outbox (workspace_id, event_id, event_source, event_source_id, test_event_code, record, received_at)
           SELECT w, e, s, p, t, r, to_timestamp(at / 1000.0)
           FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::jsonb[], $7::double precision[])
             AS u(w, e, s, p, t, r, at)
           ON CONFLICT (workspace_id, event_id) DO NOTHING
           RETURNING workspace_id, event_id`,
          [
            toQueue.map((q) => q.c.workspace_id),
            toQueue.map((q) => q.c.event_id),
            toQueue.map((q) => q.c.event_source),
            toQueue.map((q) => q.c.event_source_id),
            toQueue.map((q) => q.c.test_event_code ?? ''),
            toQueue.map((q) => JSON.stringify(q.c.record)),
            toQueue.map((q) => q.c.received_at),
          ],
        );
        const inserted = new Set(ins.rows.map((r) => `${r.workspace_id}\n${r.event_id}`));
        for (const q of toQueue) {
          const k = `${q.c.workspace_id}\n${q.c.event_id}`;
          if (!inserted.has(k)) {
            counted.push({ workspace: q.c.workspace_id, outcome: 'dropped', code: 'already_queued' });
          } else {
            inserted.delete(k); // a second copy in the same batch is a duplicate
            queued++;
            if (q.parked) counted.push({ workspace: q.c.workspace_id, outcome: 'parked', code: statuses.get(q.c.workspace_id) ?? 'not_connected' });
          }
        }
      }
      if (letters.length > 0) await appendInTransaction(tx, new Map([[Topics.conversionsDlq, letters]]));
    });
    for (const c of counted) forwardedConversions.inc({ workspace: c.workspace, outcome: c.outcome, code: c.code });
    return queued;
  }
}

function invalidLetter(r: Decoded, partition: number, reason: string, now: number): ConversionDeadLetter {
  const v = (typeof r.value === 'object' && r.value !== null ? r.value : {}) as Record<string, unknown>;
  const str = (k: string): string | null => (typeof v[k] === 'string' ? (v[k] as string) : null);
  return {
    stage: 'forwarder',
    reason: 'invalid_conversion',
    workspace_id: str('workspace_id') ?? '',
    event_id: str('event_id') ?? '',
    event_source: str('event_source'),
    event_source_id: str('event_source_id'),
    test_event_code: str('test_event_code'),
    platform_code: null,
    platform_message: `conversions.ready record at ${partition}/${r.offset} cannot be forwarded: ${reason}`,
    request_id: null,
    record: r.value,
    failed_at: now,
  };
}
