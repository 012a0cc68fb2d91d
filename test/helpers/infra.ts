/**
 * The real backing services for the integration tests (test/integration/kafka-*.test.ts): Kafka, the schema
 * registry and Postgres. globalSetup calls ensureInfra() once: the variables given in the environment win; when
 * they are missing it runs `bash infra/local/up.sh` (idempotent, 0.2 s when all is up) and reads infra/local/.env.
 * Tests read the values with infraEnv() (vitest provide/inject) and build their isolation from them:
 *  - a database of their own (freshDatabase: CREATE DATABASE + migrations; dropped at the end);
 *  - unique workspace ids, and a consumer group prefix of their own (the topics are shared and keep their data
 *    between runs: a new group is started at the current end of its topics, see startGroupsAtEnd).
 */
import { readEnvFile } from '../../services/shared/env-file.js';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { inject } from 'vitest';
import type { Db } from '../../services/shared/db/db.js';
import { openDatabase } from '../../services/shared/db/open.js';
import { openPostgres } from '../../services/shared/db/postgres.js';
import { KafkaAdmin } from '../../services/shared/kafka/admin.js';
import { KafkaConnection } from '../../services/shared/kafka/client.js';
import { readTopic, topicEnds, type ReadRecord } from '../../services/stream/kafka/reader.js';
import { AvroSerde } from '../../services/stream/kafka/serde.js';
import { silentLogger, type Logger } from '../../services/shared/logger.js';
import { TOPIC_SPECS, Topics, type TopicName } from '../../services/shared/topics.js';

export const REPO_ROOT = join(import.meta.dirname, '..', '..');

export interface InfraEnv {
  readonly KAFKA_BROKERS: string;
  readonly SCHEMA_REGISTRY_URL: string;
  readonly DATABASE_URL: string;
}

declare module 'vitest' {
  export interface ProvidedContext {
    infra: InfraEnv;
  }
}

const NAMES = ['KAFKA_BROKERS', 'SCHEMA_REGISTRY_URL', 'DATABASE_URL'] as const;

/** The services' addresses: from the environment when all three are given, else from infra/local/up.sh. */
export async function ensureInfra(env: Record<string, string | undefined> = process.env): Promise<InfraEnv> {
  if (NAMES.every((n) => env[n])) {
    return { KAFKA_BROKERS: env.KAFKA_BROKERS!, SCHEMA_REGISTRY_URL: env.SCHEMA_REGISTRY_URL!, DATABASE_URL: env.DATABASE_URL! };
  }
  const started = Date.now();
  try {
    await promisify(execFile)('bash', [join(REPO_ROOT, 'infra', 'local', 'up.sh')], {
      cwd: REPO_ROOT,
      maxBuffer: 16 * 1024 * 1024,
      timeout: 10 * 60_000,
    });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`infra/local/up.sh failed: ${e.message}\n${e.stderr ?? ''}`);
  }
  const file = readEnvFile(join(REPO_ROOT, 'infra', 'local', '.env'));
  for (const n of NAMES) if (!file[n]) throw new Error(`infra/local/.env has no ${n}`);
  process.stderr.write(`[infra] local Kafka, registry and Postgres ready in ${Date.now() - started} ms\n`);
  return { KAFKA_BROKERS: file.KAFKA_BROKERS!, SCHEMA_REGISTRY_URL: file.SCHEMA_REGISTRY_URL!, DATABASE_URL: file.DATABASE_URL! };
}

/** In a test file: the services globalSetup made sure of. */
export function infraEnv(): InfraEnv {
  return inject('infra');
}

/** A short random id for names (groups, databases, workspaces). */
export const uniqueId = (prefix: string): string => `${prefix}${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;

/**
 * A database of the test's own, migrated like the service's (unless `migrated: false`: empty, as on a first install);
 * `drop()` removes it.
 */
export async function freshDatabase(baseUrl: string, opts: { migrated?: boolean } = {}): Promise<{ url: string; db: Db; drop(): Promise<void> }> {
  const name = uniqueId('it_');
  const admin = new URL(baseUrl);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE "${name}"`);
  } finally {
    await client.end();
  }
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  const db = opts.migrated === false ? await openPostgres(url.toString()) : await openDatabase({ databaseUrl: url.toString() });
  return {
    url: url.toString(),
    db,
    async drop() {
      await db.close().catch(() => undefined);
      const c = new pg.Client({ connectionString: admin.toString() });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/** Kafka access for a test: the client (with the test's group prefix), admin, serde and topic reads. */
export interface KafkaKit {
  readonly env: InfraEnv;
  readonly groupPrefix: string;
  readonly connection: KafkaConnection;
  readonly admin: KafkaAdmin;
  readonly serde: AvroSerde;
  /** Current end offsets of a topic (start a read there to see only what comes after). */
  ends(topic: TopicName): Promise<Map<number, bigint>>;
  /** Records of a topic from `from` to its current end, decoded, read_committed. */
  read<V = any>(topic: TopicName, from?: ReadonlyMap<number, bigint>): Promise<Array<ReadRecord<V>>>;
  /**
   * Commits offsets at the current end for groups (full ids) that do not exist yet, so a stage started by the test
   * processes only what the test produces (the topics keep every earlier run's records).
   */
  startGroupsAtEnd(groups: ReadonlyArray<{ groupId: string; topic: TopicName }>): Promise<void>;
  /** startGroupsAtEnd for the pipeline's stages of a service with this group prefix: dedupe, enrich, the graph sink, the forwarder's intake. */
  startStagesAtEnd(prefix: string): Promise<void>;
  /**
   * Whether a group (full id) has committed a topic up to `upTo` (end offsets taken after the test wrote its
   * records; default: the current end). With `upTo`, traffic of others on the shared topic does not move the mark.
   */
  drained(groupId: string, topic: TopicName, upTo?: ReadonlyMap<number, bigint>): Promise<boolean>;
  close(): Promise<void>;
}

export async function kafkaKit(env: InfraEnv, groupPrefix = uniqueId('it-') + '-', logger: Logger = silentLogger): Promise<KafkaKit> {
  const connection = new KafkaConnection({ brokers: env.KAFKA_BROKERS.split(','), groupPrefix, sessionTimeoutMs: 6_000 }, logger);
  const admin = new KafkaAdmin(connection);
  await admin.ensureTopics(TOPIC_SPECS);
  const serde = await AvroSerde.connect(env.SCHEMA_REGISTRY_URL, logger);
  const used: string[] = [];
  return {
    env,
    groupPrefix,
    connection,
    admin,
    serde,
    ends: (topic) => topicEnds(admin, topic),
    read: (topic, from) => readTopic(connection, admin, serde, topic, { from, timeoutMs: 30_000 }),
    async startGroupsAtEnd(groups) {
      for (const { groupId, topic } of groups) {
        used.push(groupId);
        await admin.setGroupOffsets(groupId, topic, await topicEnds(admin, topic));
      }
    },
    async startStagesAtEnd(prefix) {
      await this.startGroupsAtEnd([
        { groupId: `${prefix}dedupe`, topic: Topics.eventsRaw },
        { groupId: `${prefix}enrich`, topic: Topics.eventsDeduped },
        { groupId: `${prefix}forwarder`, topic: Topics.conversionsReady },
        { groupId: `${prefix}identity-sink`, topic: Topics.identityChanges },
      ]);
    },
    async drained(groupId, topic, upTo) {
      const [ends, committed] = await Promise.all([upTo ?? topicEnds(admin, topic), admin.committedOffsets(groupId, topic)]);
      return [...ends].every(([p, end]) => (committed.get(p) ?? -1n) >= end);
    },
    async close() {
      await admin.deleteGroups(used);
      await admin.close();
    },
  };
}

/** Polls until `check` returns a truthy value; fails naming `what` after timeoutMs. */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined | null | false>, timeoutMs = 30_000, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** How many times each value occurs. */
export function tally<T>(values: Iterable<T>): Map<T, number> {
  const m = new Map<T, number>();
  for (const v of values) m.set(v, (m.get(v) ?? 0) + 1);
  return m;
}
