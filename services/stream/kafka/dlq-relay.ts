/**
 * The transactional outbox for the forwarder's dead letters on Kafka: they are appended to the database's
 * conversions.dlq log atomically with leaving the outbox, and this relay publishes them to the Kafka topic. Its
 * position (consumer_offsets, group `kafka-dlq-relay`) is saved after the broker acknowledged, so a crash in between
 * publishes some letters twice: readers key on workspace:event_id. An advisory lock lets one replica relay at a time.
 */
import type { Db } from '../../shared/db/db.js';
import { toNumber } from '../../shared/db/db.js';
import type { KafkaConnection } from '../../shared/kafka/client.js';
import { IdempotentProducer } from '../../shared/kafka/producer.js';
import type { AvroSerde } from './serde.js';
import type { Logger } from '../../shared/logger.js';
import { kafkaProduceDuration } from '../../shared/metrics.js';
import { PollLoop } from '../../shared/poll-loop.js';
import { Topics } from '../../shared/topics.js';

export const RELAY_GROUP = 'kafka-dlq-relay';
const RELAY_LOCK = 7_312_405;

export class DeadLetterRelay {
  private readonly producer: IdempotentProducer;
  private readonly loop: PollLoop;

  constructor(
    private readonly deps: {
      readonly db: Db;
      readonly connection: KafkaConnection;
      readonly serde: AvroSerde;
      readonly logger: Logger;
      readonly intervalMs?: number;
      readonly batchSize?: number;
    },
  ) {
    this.producer = IdempotentProducer.forRole(deps.connection, 'dlq-relay', { retries: 5, retryDelayMs: 200 });
    this.loop = new PollLoop({
      intervalMs: deps.intervalMs ?? 1_000,
      run: () => this.drain(),
      failed: (err) => deps.logger.warn({ err }, 'dead-letter relay failed; retrying'),
    });
  }

  start(): void {
    this.loop.start();
  }

  /** Publishes everything there is. Returns how many letters it published. */
  async drain(): Promise<number> {
    let total = 0;
    for (;;) {
      const n = await this.step();
      total += n;
      if (n === 0 || this.loop.stopping) return total;
    }
  }

  private async step(): Promise<number> {
    return this.deps.db.transaction(async (tx) => {
      const locked = await tx.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock($1) AS ok', [RELAY_LOCK]);
      if (!locked.rows[0]?.ok) return 0;
      const at = await tx.query<{ offset: unknown }>('SELECT "offset" FROM consumer_offsets WHERE group_id = $1 AND topic = $2', [
        RELAY_GROUP,
        Topics.conversionsDlq,
      ]);
      const from = at.rows[0] ? toNumber(at.rows[0].offset) : 0;
      const rows = await tx.query<{ offset: unknown; key: string; value: unknown }>(
        'SELECT "offset", key, value FROM log_records WHERE topic = $1 AND "offset" > $2 ORDER BY "offset" LIMIT $3',
        [Topics.conversionsDlq, from, this.deps.batchSize ?? 500],
      );
      if (rows.rows.length === 0) return 0;
      const records = rows.rows.map((r) => ({ key: r.key, value: this.deps.serde.encode(Topics.conversionsDlq, r.value) }));
      const end = kafkaProduceDuration.startTimer({ producer: RELAY_GROUP });
      await this.producer.send([{ topic: Topics.conversionsDlq, records }]);
      end();
      await tx.query(
        `INSERT INTO consumer_offsets (group_id, topic, "offset", updated_at) VALUES ($1, $2, $3, now())
         ON CONFLICT (group_id, topic) DO UPDATE SET "offset" = EXCLUDED."offset", updated_at = now()`,
        [RELAY_GROUP, Topics.conversionsDlq, toNumber(rows.rows.at(-1)!.offset)],
      );
      return rows.rows.length;
    });
  }

  async stop(): Promise<void> {
    await this.loop.stop();
    await this.producer.close();
  }
}
