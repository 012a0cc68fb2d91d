/**
 * Picks the runtime that drives the pipeline's processors, from configuration alone: the embedded default (the log
 * and the stages in the process's own database) or Kafka (KAFKA_BROKERS + SCHEMA_REGISTRY_URL + DATABASE_URL).
 * service.ts composes everything else the same way for both.
 *
 * On Kafka each stage runs where SERVICE_ROLE says (`dedupe`, `enrich`, `forwarder`, and the graph sink beside enrich or
 * in `identity-sink` processes: GRAPH_SINK_ROLE; `all` runs every role), one consumer group per stage, so N processes
 * with the same role share the stage's partitions.
 */
import type { AnyStage, StageRunner } from '../stream/contract.js';
import type { Config, ServiceRole } from '../shared/config.js';
import type { Db } from '../shared/db/db.js';
import { KafkaAdmin } from '../shared/kafka/admin.js';
import { KafkaConnection } from '../shared/kafka/client.js';
import { AvroSerde } from '../stream/kafka/serde.js';
import type { Logger } from '../shared/logger.js';
import { topicSpecs } from '../shared/topics.js';
import { EmbeddedLog } from '../stream/embedded/log.js';
import { startRetention } from '../stream/embedded/retention.js';
import { startVacuum } from '../stream/embedded/vacuum.js';
import { EmbeddedStageRunner } from '../stream/embedded/runner.js';
import { KafkaStageRunner } from '../stream/kafka/runner.js';
import { DeadLetterRelay } from '../stream/kafka/dlq-relay.js';
import { KafkaEventLog } from '../stream/kafka/log.js';
import type { EventLogProducer } from '../stream/log.js';
import { EmbeddedRangeReader } from '../stream/embedded/range-reader.js';
import { KafkaRangeReader } from '../stream/kafka/range-reader.js';
import type { RangeReader } from '../stream/range.js';
import { toNumber } from '../shared/db/db.js';
import { Topics } from '../shared/topics.js';
import { ENRICH_STAGE } from '../enrich/processor.js';
import { roleOfStage } from './pipeline.js';
import { INTAKE_GROUP } from '../forwarder/intake.js';
import { appendInTransaction } from '../stream/embedded/log.js';
import { IdempotentProducer } from '../shared/kafka/producer.js';
import { embeddedAcceptedEvents, kafkaAcceptedEvents, type AcceptedEvents } from '../datateam/accepted-events.js';
import { embeddedPositions, kafkaPositions, type PositionsReader } from '../datateam/log-positions.js';
import { CannotRedrive, type RedriveLog } from '../datateam/redrive.js';
import { embeddedTopicRecords, kafkaTopicRecords, type TopicRecords } from '../datateam/topic-records.js';

export interface PipelineRuntime {
  readonly kind: 'embedded' | 'kafka';
  /** What the gateway appends to (on Kafka: undefined when this process does not run the gateway role). */
  readonly producer: EventLogProducer | undefined;
  /** The log in the database: the embedded runtime's topics; on Kafka only the forwarder's dead-letter outbox. */
  readonly log: EmbeddedLog;
  readonly runners: readonly StageRunner[];
  /** Reads a topic again over a time range (replays), without touching the live groups. */
  readonly rangeReader: RangeReader;
  /** Records the live enrich and forwarder stages have not processed yet (a replay waits while it is high). */
  liveBacklog(): Promise<number>;
  /** What the data-team operations (services/datateam) need of the runtime: positions, the raw log, a redrive log. */
  readonly dataTeam: {
    readonly positions: PositionsReader;
    readonly acceptedEvents: AcceptedEvents;
    readonly topicRecords: TopicRecords;
    readonly redriveLog: RedriveLog;
  };
  /** Starts the stages (and, on Kafka, the dead-letter relay). */
  start(): Promise<void>;
  /** Stops taking appends and finishes the queued ones (after the HTTP server stopped). */
  closeProducer(): Promise<void>;
  /** Stops the stages (batches in flight finish) and disconnects. */
  close(): Promise<void>;
}

/** Counting a live stage's backlog stops here: more than the replay's threshold (replay/worker.ts) is enough to know. */
const LIVE_BACKLOG_COUNT_CAP = 10_000;

/** The live stages a replay yields to: it feeds the same enrich logic and the same outbox. */
const LIVE_STAGES = [
  { group: ENRICH_STAGE, topic: Topics.eventsDeduped },
  { group: INTAKE_GROUP, topic: Topics.conversionsReady },
] as const;

const runs = (role: ServiceRole, ...roles: ServiceRole[]): boolean => role === 'all' || roles.includes(role);

export interface RuntimeDeps {
  readonly config: Config;
  readonly db: Db;
  readonly logger: Logger;
  readonly stages: () => AnyStage[];
  /** Every stage's name and input topic (the consumer groups whose positions GET /admin/v1/pipeline shows). */
  readonly stageInputs: ReadonlyArray<{ readonly stage: string; readonly topic: string }>;
}

export async function openRuntime(deps: RuntimeDeps): Promise<PipelineRuntime> {
  return deps.config.kafka ? openKafkaRuntime(deps, deps.config.kafka) : openEmbeddedRuntime(deps);
}

function openEmbeddedRuntime({ config, db, logger, stages, stageInputs }: RuntimeDeps): PipelineRuntime {
  const log = new EmbeddedLog(db);
  let retention: { stop(): void } | undefined;
  let vacuum: { stop(): Promise<void> } | undefined;
  // One process holds the whole embedded pipeline: any stage role runs every stage.
  const runners = runs(config.role, 'dedupe', 'enrich', 'identity-sink', 'forwarder')
    ? stages().map((p) => new EmbeddedStageRunner(db, log, p, { logger: logger.child({ stage: p.name }) }))
    : [];
  return {
    kind: 'embedded',
    producer: log,
    log,
    runners,
    rangeReader: new EmbeddedRangeReader(db),
    async liveBacklog() {
      // Counted rows, capped: the embedded log's offsets are one sequence shared by every topic, so an offset
      // difference is not a count of the topic's records. The replay only needs to know "above its threshold".
      const r = await db.query<{ lag: unknown }>(
        `SELECT COALESCE(sum(n), 0) AS lag FROM unnest($1::text[], $2::text[]) AS t(group_id, topic)
         LEFT JOIN consumer_offsets c ON c.group_id = t.group_id AND c.topic = t.topic
         CROSS JOIN LATERAL (SELECT count(*) AS n FROM (SELECT 1 FROM log_records l
                             WHERE l.topic = t.topic AND l."offset" > COALESCE(c."offset", 0) LIMIT $3) AS behind) AS counted`,
        [LIVE_STAGES.map((s) => s.group), LIVE_STAGES.map((s) => s.topic), LIVE_BACKLOG_COUNT_CAP],
      );
      return toNumber(r.rows[0]?.lag ?? 0);
    },
    dataTeam: {
      positions: embeddedPositions(db, stageInputs.map((s) => ({ group: s.stage, topic: s.topic }))),
      acceptedEvents: embeddedAcceptedEvents(db),
      topicRecords: embeddedTopicRecords(db),
      redriveLog: {
        reappend: (tx, topic, records) => appendInTransaction(tx, new Map([[topic, records]])),
        committed: (topic) => log.announce(topic),
      },
    },
    async start() {
      for (const r of runners) await r.start();
      // The process that runs the stages also keeps the log within its topics' retention.
      if (runners.length > 0) retention = startRetention(db, logger, topicSpecs({ rawLogRetentionMs: config.rawLogRetentionMs }));
      // PGlite has no autovacuum (stream/embedded/vacuum.ts); on Postgres the server's runs.
      if (db.kind === 'pglite') vacuum = startVacuum(db, logger);
    },
    closeProducer: () => log.close(),
    async close() {
      retention?.stop();
      await Promise.all([...runners.map((r) => r.stop()), vacuum?.stop()]);
    },
  };
}

async function openKafkaRuntime(
  { config, db, logger, stages, stageInputs }: RuntimeDeps,
  kafka: NonNullable<Config['kafka']>,
): Promise<PipelineRuntime> {
  if (db.kind !== 'postgres') throw new Error('the Kafka runtime keeps its state in Postgres: set DATABASE_URL');
  const log = logger.child({ runtime: 'kafka' });
  const connection = new KafkaConnection(
    { brokers: kafka.brokers, groupPrefix: kafka.groupPrefix, sessionTimeoutMs: kafka.sessionTimeoutMs },
    log,
  );
  const admin = new KafkaAdmin(connection);
  const specs = topicSpecs({ rawLogRetentionMs: config.rawLogRetentionMs });
  const created = await admin.ensureTopics(specs);
  if (created.length > 0) log.info({ topics: created }, 'created topics');
  const aligned = await admin.alignRetention(specs);
  if (aligned.length > 0) log.info({ topics: aligned }, 'topic retention set to the configured value');
  const serde = await AvroSerde.connect(kafka.schemaRegistryUrl, log);

  const gateway = runs(config.role, 'gateway') ? new KafkaEventLog(connection, serde, admin, log) : undefined;
  const runners: StageRunner[] = stages()
    .filter((p) => runs(config.role, roleOfStage(p.name, config.graphSinkRole) as ServiceRole))
    .map(
      (processor) =>
        new KafkaStageRunner({ connection, serde, admin, sql: db, processor, options: { logger: log } }) as StageRunner,
    );
  const forwarder = runs(config.role, 'forwarder');
  const relay = forwarder ? new DeadLetterRelay({ db, connection, serde, logger: log }) : undefined;
  const embeddedLog = new EmbeddedLog(db);
  // Redriven records go back to their stage's input through a producer of their own (acks=all, idempotent).
  const redriveProducer = IdempotentProducer.forRole(connection, 'redrive', { retries: 5, retryDelayMs: 200 });
  const redriveLog: RedriveLog = {
    async reappend(_tx, topic, records) {
      let encoded;
      try {
        encoded = records.map((r) => ({ key: r.key, value: serde.encode(topic, r.value) }));
      } catch (err) {
        throw new CannotRedrive(`the record does not fit ${topic}'s schema: ${(err as Error).message}`);
      }
      await redriveProducer.send([{ topic, records: encoded }]);
    },
  };

  // The live backlog: the live stages' lag from the broker (the pipeline status's reader), at most every 2 s.
  const livePositions = kafkaPositions(admin, LIVE_STAGES.map((s) => ({ group: connection.groupId(s.group), topic: s.topic })));
  let backlog = { at: 0, value: 0 };
  const liveBacklog = async (): Promise<number> => {
    if (Date.now() - backlog.at < 2_000) return backlog.value;
    const { consumers } = await livePositions();
    backlog = { at: Date.now(), value: consumers.reduce((n, c) => n + c.lag, 0) };
    return backlog.value;
  };

  return {
    kind: 'kafka',
    producer: gateway,
    log: embeddedLog,
    runners,
    rangeReader: new KafkaRangeReader({ connection, admin, serde }),
    liveBacklog,
    dataTeam: {
      positions: kafkaPositions(admin, stageInputs.map((s) => ({ group: connection.groupId(s.stage), topic: s.topic }))),
      acceptedEvents: kafkaAcceptedEvents(connection, admin, serde),
      topicRecords: kafkaTopicRecords(connection, admin, serde),
      redriveLog,
    },
    async start() {
      for (const r of runners) await r.start();
      relay?.start();
    },
    async closeProducer() {
      await gateway?.close();
    },
    async close() {
      await Promise.all(runners.map((r) => r.stop()));
      await relay?.stop();
      await redriveProducer.close();
      await admin.close();
    },
  };
}
