/**
 * Every topic of the service, in one place. The embedded runtime keeps the same names as tables of its log;
 * the Kafka runtime creates them with these partition counts and configs (see infra/local and docs/operations.md).
 */
export interface TopicSpec {
  readonly name: string;
  readonly partitions: number;
  /** Kafka topic configs, e.g. cleanup.policy. */
  readonly config: Readonly<Record<string, string>>;
  readonly purpose: string;
}

const DAY_MS = 24 * 60 * 60 * 1000;

export const Topics = {
  eventsRaw: 'events.raw',
  dedupeState: 'events.dedupe-state',
  eventsDeduped: 'events.deduped',
  identityState: 'identity.graph-state',
  identityChanges: 'identity.graph-changes',
  conversionsReady: 'conversions.ready',
  conversionsDlq: 'conversions.dlq',
  eventsDlq: 'events.dlq',
} as const;

export type TopicName = (typeof Topics)[keyof typeof Topics];

/** Partition count shared by the co-partitioned pair events.raw / events.dedupe-state. */
export const PIPELINE_PARTITIONS = 6;

/** Default retention of the raw log (events.raw and events.deduped): RAW_LOG_RETENTION_DAYS. */
export const RAW_LOG_RETENTION_DAYS = 7;

/** The raw log: the accepted events, as received (events.raw) and first-seen (events.deduped). Replays read it. */
export const RAW_LOG_TOPICS: readonly string[] = [Topics.eventsRaw, Topics.eventsDeduped];

export const TOPIC_SPECS: readonly TopicSpec[] = [
  {
    name: Topics.eventsRaw,
    partitions: PIPELINE_PARTITIONS,
    config: { 'retention.ms': String(RAW_LOG_RETENTION_DAYS * DAY_MS), 'min.insync.replicas': '1' },
    purpose: 'accepted envelopes, keyed workspace:idempotency-key',
  },
  {
    name: Topics.dedupeState,
    partitions: PIPELINE_PARTITIONS,
    // compact,delete: dedupe's compact in-memory store evicts expired markers without tombstones, so delete
    // retention (longer than the default 7-day dedupe window) is what bounds the changelog. A DEDUPE_WINDOW_HOURS
    // above 8 days needs this retention raised with it (docs/operations.md).
    config: {
      'cleanup.policy': 'compact,delete',
      'retention.ms': String(8 * DAY_MS),
      'min.compaction.lag.ms': '60000',
      'segment.ms': String(DAY_MS),
    },
    purpose: 'changelog of the dedupe store (first-seen markers), co-partitioned with events.raw',
  },
  {
    name: Topics.eventsDeduped,
    partitions: PIPELINE_PARTITIONS,
    config: { 'retention.ms': String(RAW_LOG_RETENTION_DAYS * DAY_MS) },
    purpose: 'first-seen envelopes, keyed workspace:key-mode (the identity graph they feed; one partition owns it)',
  },
  {
    name: Topics.identityState,
    partitions: PIPELINE_PARTITIONS,
    // Enrich tombstones what ages out of its store, so compaction alone bounds this changelog.
    config: { 'cleanup.policy': 'compact', 'min.compaction.lag.ms': '60000', 'segment.ms': String(DAY_MS) },
    purpose: "changelog of enrich's identity graph (identifier and cluster entries), co-partitioned with events.deduped",
  },
  {
    name: Topics.identityChanges,
    partitions: PIPELINE_PARTITIONS,
    config: { 'retention.ms': String(7 * DAY_MS) },
    purpose: 'what each enrich batch changed in the identity graph, keyed workspace:key-mode; the graph sink writes it to the queryable tables',
  },
  {
    name: Topics.conversionsReady,
    partitions: PIPELINE_PARTITIONS,
    config: { 'retention.ms': String(7 * DAY_MS) },
    purpose: 'platform-ready conversion records, keyed workspace:event_id',
  },
  {
    name: Topics.conversionsDlq,
    partitions: 1,
    config: { 'retention.ms': String(30 * DAY_MS) },
    purpose: 'conversions the platform rejected permanently, with code and message',
  },
  {
    name: Topics.eventsDlq,
    partitions: 1,
    config: { 'retention.ms': String(30 * DAY_MS) },
    purpose: 'records a stage could not process, with the stage and the reason',
  },
];

/** The topic specs with the raw log's retention set (RAW_LOG_RETENTION_DAYS); the others as in TOPIC_SPECS. */
export function topicSpecs(opts: { readonly rawLogRetentionMs: number }): readonly TopicSpec[] {
  return TOPIC_SPECS.map((spec) =>
    RAW_LOG_TOPICS.includes(spec.name) ? { ...spec, config: { ...spec.config, 'retention.ms': String(opts.rawLogRetentionMs) } } : spec,
  );
}
