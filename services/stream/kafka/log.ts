/**
 * The gateway's log on Kafka: events.raw through an idempotent producer with acks=all. append() resolves once the
 * broker acknowledged every record of the request, so a 202 means durable. Appends arriving while a send is in
 * flight go together in the next one, so durability costs one round trip per group, not per request.
 *
 * At its deadline an append is rejected with NotDurableError (503); if its send was already in flight the record
 * may still be written, and the sender's retry is absorbed by dedupe (or enrich's event_id claim without a key).
 * Sends are bounded by a few retries so an outage fails them instead of piling them up.
 */
import type { KafkaAdmin } from '../../shared/kafka/admin.js';
import type { KafkaConnection } from '../../shared/kafka/client.js';
import { IdempotentProducer, type OutgoingRecord } from '../../shared/kafka/producer.js';
import type { AvroSerde } from './serde.js';
import type { Logger } from '../../shared/logger.js';
import { kafkaProduceDuration } from '../../shared/metrics.js';
import type { TopicName } from '../../shared/topics.js';
import { NotDurableError, type EventLogProducer, type ProducedRecord, takeGroup } from '../log.js';

interface PendingAppend {
  readonly topic: TopicName;
  readonly records: readonly OutgoingRecord[];
  /** queued → sending → settled. */
  state: 'queued' | 'sending' | 'settled';
  timer?: NodeJS.Timeout;
  resolve(): void;
  reject(err: Error): void;
}

export interface KafkaEventLogOptions {
  /** Wait this long for more appends when a send could start at once (default 1 ms). */
  readonly lingerMs?: number;
  /** Most records in one send (default 5000). */
  readonly maxGroupRecords?: number;
  /** How long a reachability result is reused by healthy() (default 1000 ms). */
  readonly healthCacheMs?: number;
}

export class KafkaEventLog implements EventLogProducer {
  private readonly producer: IdempotentProducer;
  private queue: PendingAppend[] = [];
  /** Appends whose caller is still waiting for an answer. */
  private readonly unsettled = new Set<PendingAppend>();
  private flushing = false;
  private flushTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private inFlight: Promise<void> = Promise.resolve();
  private health: { at: number; ok: boolean } | undefined;
  private probing: Promise<boolean> | undefined;

  constructor(
    connection: KafkaConnection,
    private readonly serde: AvroSerde,
    private readonly admin: KafkaAdmin,
    private readonly logger: Logger,
    private readonly opts: KafkaEventLogOptions = {},
  ) {
    this.producer = IdempotentProducer.forRole(connection, 'gateway', { retries: 2, retryDelayMs: 100 });
  }

  append(topic: TopicName, records: readonly ProducedRecord[], deadline: number): Promise<void> {
    if (this.closed) return Promise.reject(new NotDurableError('log is closed'));
    if (records.length === 0) return Promise.resolve();
    // Encoding errors are bugs (the gateway only appends valid envelopes): they surface as 500, not 503.
    const encoded = records.map((r) => ({ key: r.key, value: this.serde.encode(topic, r.value) }));
    return new Promise<void>((resolve, reject) => {
      const pending: PendingAppend = { topic, records: encoded, state: 'queued', resolve, reject };
      pending.timer = setTimeout(() => {
        if (pending.state === 'settled') return;
        if (pending.state === 'queued') this.queue = this.queue.filter((p) => p !== pending);
        pending.state = 'settled';
        this.unsettled.delete(pending);
        reject(new NotDurableError('the broker did not acknowledge the events before the deadline'));
      }, Math.max(0, deadline - Date.now()));
      this.queue.push(pending);
      this.unsettled.add(pending);
      this.scheduleFlush();
    });
  }

  private scheduleFlush(): void {
    if (this.flushing || this.flushTimer) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = undefined;
      this.inFlight = this.flushLoop();
    }, this.opts.lingerMs ?? 1);
  }

  private async flushLoop(): Promise<void> {
    this.flushing = true;
    try {
      while (this.queue.length > 0) {
        const group = this.takeGroup();
        for (const p of group) p.state = 'sending';
        const byTopic = new Map<TopicName, OutgoingRecord[]>();
        for (const p of group) {
          const list = byTopic.get(p.topic) ?? [];
          for (const r of p.records) list.push(r);
          byTopic.set(p.topic, list);
        }
        const end = kafkaProduceDuration.startTimer({ producer: 'gateway' });
        try {
          await this.producer.send([...byTopic].map(([topic, records]) => ({ topic, records })));
          end();
          this.health = { at: Date.now(), ok: true };
          for (const p of group) this.settle(p);
        } catch (err) {
          this.logger.warn({ err, records: group.reduce((n, p) => n + p.records.length, 0) }, 'kafka append failed');
          this.health = { at: Date.now(), ok: false };
          const e = new NotDurableError(`the broker did not acknowledge the events: ${(err as Error).message}`);
          for (const p of group) this.settle(p, e);
        }
      }
    } finally {
      this.flushing = false;
    }
  }

  private settle(p: PendingAppend, err?: Error): void {
    if (p.state === 'settled') return;
    p.state = 'settled';
    this.unsettled.delete(p);
    clearTimeout(p.timer);
    if (err) p.reject(err);
    else p.resolve();
  }

  private takeGroup(): PendingAppend[] {
    return takeGroup(this.queue, this.opts.maxGroupRecords ?? 5_000);
  }

  /** Broker reachability (cached briefly): /readyz answers 503 while the broker is down. */
  async healthy(): Promise<boolean> {
    if (this.closed) return false;
    const cacheMs = this.opts.healthCacheMs ?? 1_000;
    if (this.health && Date.now() - this.health.at < cacheMs) return this.health.ok;
    this.probing ??= this.admin.probe(1_000).then((ok) => {
      this.health = { at: Date.now(), ok };
      this.probing = undefined;
      return ok;
    });
    return this.probing;
  }

  /**
   * Stops taking appends and disconnects once every caller has its answer: queued appends are sent, or answered at
   * their deadline (a send still retrying against a dead broker is not waited for beyond that).
   */
  async close(): Promise<void> {
    this.closed = true;
    if (this.flushTimer) {
      clearTimeout(this.flushTimer);
      this.flushTimer = undefined;
      this.inFlight = this.flushLoop();
    }
    while (this.unsettled.size > 0) {
      if (!this.flushing && this.queue.length > 0) this.inFlight = this.flushLoop();
      await Promise.race([this.inFlight, new Promise((r) => setTimeout(r, 10))]);
    }
    await this.producer.close();
  }
}
