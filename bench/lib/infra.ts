/**
 * Kafka, the schema registry and Postgres for the Kafka benchmarks, as the tests get them (test/helpers/infra.ts):
 * KAFKA_BROKERS / SCHEMA_REGISTRY_URL / DATABASE_URL from the environment when all three are set, else
 * `bash infra/local/up.sh` (idempotent; ~30 s on a fresh clone, 0.2 s when up) and infra/local/.env.
 * Each benchmark gets a database of its own and a consumer group prefix of its own.
 */
import { readEnvFile } from '../../services/shared/env-file.js';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { openDatabase } from '../../services/shared/db/open.js';
import { REPO_ROOT } from './proc.js';

const NAMES = ['KAFKA_BROKERS', 'SCHEMA_REGISTRY_URL', 'DATABASE_URL'] as const;

export interface KafkaEnv {
  readonly ready: boolean;
  readonly reason?: string;
  readonly env: Record<(typeof NAMES)[number], string>;
}

export async function kafkaEnv(log: (l: string) => void): Promise<KafkaEnv> {
  const shared = await sharedKafkaEnv(log);
  if (!shared.ready || process.env.BENCH_PRIVATE_KAFKA !== '1') return shared;
  return privateBroker(shared, log);
}

let privateRunDir: string | undefined;
const PRIVATE_PORT = Number(process.env.BENCH_PRIVATE_KAFKA_PORT ?? 29192);
const privateEnv = () => ({ ...process.env, INFRA_RUN_DIR: privateRunDir!, KAFKA_PORT: String(PRIVATE_PORT), KAFKA_CONTROLLER_PORT: String(PRIVATE_PORT + 1) });

/**
 * BENCH_PRIVATE_KAFKA=1: a broker of the bench's own (infra/local/kafka.sh with its own run dir and ports; the
 * registry and Postgres stay shared). The benchmarks write hundreds of thousands of records to the service's topics;
 * on a broker that other work (tests) uses at the same time, their stages would have to read past them, and their
 * load would disturb the measurement. `stopPrivateBroker()` removes it again.
 */
async function privateBroker(shared: KafkaEnv, log: (l: string) => void): Promise<KafkaEnv> {
  privateRunDir = mkdtempSync(join(tmpdir(), 'bench-kafka-'));
  const started = Date.now();
  const sh = (cmd: string) => promisify(execFile)('bash', [join(REPO_ROOT, 'infra', 'local', 'kafka.sh'), cmd], { env: privateEnv(), maxBuffer: 16 * 1024 * 1024 });
  try {
    // No `kafka.sh topics`: the service creates its topics itself (KafkaAdmin.ensureTopics), which also copes with
    // config values holding commas (cleanup.policy=compact,delete) that the script's `k=v,k=v` format cannot carry.
    await sh('start');
    await sh('warmup');
  } catch (err) {
    await stopPrivateBroker();
    return { ready: false, reason: `private broker failed: ${(err as Error).message.split('\n')[0]}`, env: shared.env };
  }
  log(`infra: private broker on 127.0.0.1:${PRIVATE_PORT} ready in ${Date.now() - started} ms (BENCH_PRIVATE_KAFKA=1)`);
  return { ready: true, env: { ...shared.env, KAFKA_BROKERS: `127.0.0.1:${PRIVATE_PORT}` } };
}

/**
 * The pid files of the broker the Kafka benchmarks use and of the local Postgres (infra/local's run dir, or the
 * private broker's), for CPU accounting from /proc; a file that does not exist means the process is not ours to see.
 */
export function infraPidFiles(): { broker: string; postgres: string } {
  const shared = process.env.INFRA_RUN_DIR ?? join(REPO_ROOT, 'infra', 'local', 'run');
  return { broker: join(privateRunDir ?? shared, 'kafka', 'kafka.pid'), postgres: join(shared, 'pg', 'data', 'postmaster.pid') };
}

export async function stopPrivateBroker(): Promise<void> {
  if (!privateRunDir) return;
  await promisify(execFile)('bash', [join(REPO_ROOT, 'infra', 'local', 'kafka.sh'), 'stop'], { env: privateEnv() }).catch(() => undefined);
  rmSync(privateRunDir, { recursive: true, force: true });
  privateRunDir = undefined;
}

async function sharedKafkaEnv(log: (l: string) => void): Promise<KafkaEnv> {
  const empty = { KAFKA_BROKERS: '', SCHEMA_REGISTRY_URL: '', DATABASE_URL: '' };
  if (NAMES.every((n) => process.env[n])) {
    return { ready: true, env: { KAFKA_BROKERS: process.env.KAFKA_BROKERS!, SCHEMA_REGISTRY_URL: process.env.SCHEMA_REGISTRY_URL!, DATABASE_URL: process.env.DATABASE_URL! } };
  }
  const started = Date.now();
  log('infra: bash infra/local/up.sh (Kafka, registry, Postgres)');
  try {
    await promisify(execFile)('bash', [join(REPO_ROOT, 'infra', 'local', 'up.sh')], { cwd: REPO_ROOT, maxBuffer: 16 * 1024 * 1024, timeout: 10 * 60_000 });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    log(`infra: up.sh failed: ${e.message}\n${(e.stderr ?? '').slice(-2000)}`);
    return { ready: false, reason: `infra/local/up.sh failed: ${e.message.split('\n')[0]}`, env: empty };
  }
  const file = readEnvFile(join(REPO_ROOT, 'infra', 'local', '.env'));
  if (!NAMES.every((n) => file[n])) return { ready: false, reason: 'infra/local/.env is incomplete', env: empty };
  log(`infra: ready in ${Date.now() - started} ms`);
  return { ready: true, env: { KAFKA_BROKERS: file.KAFKA_BROKERS!, SCHEMA_REGISTRY_URL: file.SCHEMA_REGISTRY_URL!, DATABASE_URL: file.DATABASE_URL! } };
}

export const uniqueId = (prefix: string): string => `${prefix}${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;

/** A migrated database of the benchmark's own on the Postgres of DATABASE_URL; `drop()` removes it. */
export async function freshDatabase(baseUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = uniqueId('bench_');
  const adminUrl = new URL(baseUrl);
  adminUrl.pathname = '/postgres';
  const run = async (sql: string) => {
    const c = new pg.Client({ connectionString: adminUrl.toString() });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  await run(`CREATE DATABASE "${name}"`);
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  const db = await openDatabase({ databaseUrl: url.toString() });
  await db.close();
  return { url: url.toString(), drop: () => run(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`) };
}
