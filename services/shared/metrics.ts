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
  help: 'Events seen by the gateway, by endpoint and outcome (accepted, rejected) and reason',
  labelNames: ['endpoint', 'outcome', 'reason'] as const,
  registers: [registry],
});

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

export const stateStorePurged = new Counter({
  name: 'state_store_purged_total',
  help: 'Expired entries removed from a stage state store (window retention)',
  labelNames: ['store'] as const,
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
