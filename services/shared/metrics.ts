/**
 * prom-client metrics shared by every process. Metrics are module singletons registered in one registry so that
 * building several apps in one process (tests) never registers a name twice. Each service adds its own metrics
 * to `registry` in its own module.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export const registry = new Registry();
collectDefaultMetrics({ register: registry });

export const httpRequests = new Counter({
  name: 'http_requests_total',
  help: 'HTTP requests by route and status code',
  labelNames: ['route', 'method', 'status'] as const,
  registers: [registry],
});

export const httpDuration = new Histogram({
  name: 'http_request_duration_seconds',
  help: 'HTTP request latency by route',
  labelNames: ['route', 'method'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 1.5, 2.5],
  registers: [registry],
});

export const eventsIngested = new Counter({
  name: 'events_ingested_total',
  help: 'Events seen by the gateway, one count per event, by endpoint, outcome (accepted, rejected) and reason (the problem slug)',
  labelNames: ['endpoint', 'outcome', 'reason'] as const,
  registers: [registry],
});

/**
 * How many events a rejected request carried: the length of its JSON array body, or 1 when the body is not an array
 * (unparseable JSON, a single object on endpoint B, nothing at all), so every rejected request counts at least once
 * and an error ratio over events_ingested_total is per event on both sides.
 */
// Both endpoints' accepted series exist from the start (at 0): a ratio over them is defined before the first event.
for (const endpoint of ['events', 'sgtm']) eventsIngested.inc({ endpoint, outcome: 'accepted', reason: '' }, 0);

export function eventsInBody(body: unknown): number {
  return Array.isArray(body) && body.length > 0 ? body.length : 1;
}

export const logAppendDuration = new Histogram({
  name: 'log_append_duration_seconds',
  help: 'Time to make a request\'s events durable in the log',
  labelNames: ['runtime'] as const,
  buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 1.5],
  registers: [registry],
});

export const stageRecords = new Counter({
  name: 'stage_records_total',
  help: 'Records processed by a pipeline stage, by outcome (ok, drop, dlq) and reason',
  labelNames: ['stage', 'outcome', 'reason'] as const,
  registers: [registry],
});

/** What stage_records_total needs of a record's outcome (not its outputs). */
export interface CountedOutcome {
  readonly type: string;
  readonly reason?: string;
}

/** A batch's outcomes counted into stage_records_total once per (outcome, reason), not once per record. */
export function countStageRecords(stage: string, outcomes: Iterable<CountedOutcome>): void {
  const counts = new Map<string, { outcome: string; reason: string; n: number }>();
  for (const o of outcomes) {
    const reason = o.type === 'ok' ? '' : (o.reason ?? '');
    const key = `${o.type}\n${reason}`;
    const c = counts.get(key);
    if (c) c.n++;
    else counts.set(key, { outcome: o.type, reason, n: 1 });
  }
  for (const c of counts.values()) stageRecords.inc({ stage, outcome: c.outcome, reason: c.reason }, c.n);
}

export const stageBatchDuration = new Histogram({
  name: 'stage_batch_duration_seconds',
  help: 'Time a stage spends on one batch, commit included',
  labelNames: ['stage'] as const,
  buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers: [registry],
});

export const consumerLag = new Gauge({
  name: 'consumer_lag_records',
  help: 'Records between a stage\'s committed offset and the end of its input, per topic/partition',
  labelNames: ['stage', 'topic', 'partition'] as const,
  registers: [registry],
});

/**
 * The one way a runner reports its lag: `end` (the partition's high watermark) minus the group's next offset to
 * read. Never negative. Call it after every committed batch and from any periodic read of the broker.
 */
export function setConsumerLag(stage: string, topic: string, partition: number, end: bigint, next: bigint): void {
  const lag = end - next;
  consumerLag.set({ stage, topic, partition: String(partition) }, Number(lag > 0n ? lag : 0n));
}

/** 1 when the last probe of a dependency (postgres, kafka) answered, else 0; probed at most every few seconds. */
export const dependencyUp = new Gauge({
  name: 'dependency_up',
  help: 'Whether the last cheap probe of a dependency answered (1) or not (0): postgres (SELECT 1), kafka (metadata)',
  labelNames: ['dependency'] as const,
  registers: [registry],
});

export const stateStorePurged = new Counter({
  name: 'state_store_purged_total',
  help: 'Expired entries removed from a stage state store (window retention)',
  labelNames: ['store'] as const,
  registers: [registry],
});

export const embeddedVacuumDuration = new Histogram({
  name: 'embedded_vacuum_duration_seconds',
  help: 'VACUUMs the embedded runtime ran on its PGlite store (which has no autovacuum), by table: each holds the store up while it runs',
  labelNames: ['table'] as const,
  buckets: [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [registry],
});

/**
 * The embedded store's thread (PGlite) runs every statement of the process, one at a time: its busy time over wall
 * time is how close the embedded runtime is to its store's ceiling (shared/db/pglite.ts).
 */
export const embeddedStoreBusy = new Counter({
  name: 'embedded_store_busy_seconds_total',
  help: "Time the embedded store's thread (PGlite) was busy: statements, their protocol, its garbage collection. Its rate is the store's utilisation (1 = saturated)",
  registers: [registry],
});

export const embeddedStoreStatements = new Counter({
  name: 'embedded_store_statements_total',
  help: "Statements (and scripts) the embedded store's thread (PGlite) ran",
  registers: [registry],
});

// ---- Kafka runtime (services/stream/kafka/*.ts) ----

export const kafkaProduceDuration = new Histogram({
  name: 'kafka_produce_duration_seconds',
  help: 'Time until the broker acknowledged a produce (gateway, relay) or committed a stage transaction (outputs, state, offsets)',
  labelNames: ['producer'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers: [registry],
});

export const kafkaRebalances = new Counter({
  name: 'kafka_rebalances_total',
  help: 'Consumer group generations this process joined (each one is a rebalance), by group',
  labelNames: ['group'] as const,
  registers: [registry],
});

export const stateStoreRestored = new Counter({
  name: 'state_store_restored_records_total',
  help: 'Changelog records applied to restore a stage state store after a partition was assigned',
  labelNames: ['store'] as const,
  registers: [registry],
});

export const stateStoreRestoreDuration = new Histogram({
  name: 'state_store_restore_duration_seconds',
  help: 'Time from a partition assignment until its state store is restored and the partition is processed',
  labelNames: ['store'] as const,
  buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  registers: [registry],
});
