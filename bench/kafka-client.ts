/**
 * kafka-client: produce throughput of the project's kafkajs adapter (the baseline) against @platformatic/kafka 2.x for
 * the same records and acks (bench/lib/kafka-client-worker.ts says exactly how). Each run is its own process on the
 * server's core; the broker is shared and unpinned.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KafkaAdmin } from '../services/shared/kafka/admin.js';
import { KafkaConnection } from '../services/shared/kafka/client.js';
import { silentLogger } from '../services/shared/logger.js';
import type { ClientResult, ClientSpec } from './lib/kafka-client-worker.js';
import { DIST, SERVER_CPU, spawnChild } from './lib/proc.js';
import { round, type BenchResult } from './lib/results.js';

export const BENCH_TOPIC = 'bench.kafka-client';
const BATCHES = [100, 1000];
const DURATION_SEC = Number(process.env.BENCH_CLIENT_SEC ?? 8);

async function runClient(spec: Omit<ClientSpec, 'out'>): Promise<ClientResult> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-client-'));
  const specFile = join(dir, 'spec.json');
  const out = join(dir, 'out.json');
  writeFileSync(specFile, JSON.stringify({ ...spec, out }));
  const child = spawnChild(SERVER_CPU, [process.execPath, join(DIST, 'bench', 'lib', 'kafka-client-worker.js'), specFile], {});
  const code = await new Promise<number | null>((r) => child.child.once('exit', (c) => r(c)));
  if (code !== 0) throw new Error(`kafka client worker (${spec.client}) failed:\n${child.output().slice(-3000)}`);
  const result = JSON.parse(readFileSync(out, 'utf8')) as ClientResult;
  rmSync(dir, { recursive: true, force: true });
  return result;
}

export async function benchKafkaClient(env: Record<string, string>, log: (l: string) => void): Promise<Omit<BenchResult, 'git_sha' | 'date'>> {
  const brokers = env.KAFKA_BROKERS!.split(',');
  const admin = new KafkaAdmin(new KafkaConnection({ brokers }, silentLogger));
  await admin.ensureTopics([{ name: BENCH_TOPIC, partitions: 6, config: { 'retention.ms': String(3_600_000) }, purpose: 'bench' }]);
  const endSum = async () => [...(await admin.endOffsets(BENCH_TOPIC)).values()].reduce((s, o) => s + o.high, 0n);
  log('kafka-client (kafkajs adapter vs @platformatic/kafka 2.x; idempotent, acks=-1, one send in flight)');
  const runs: ClientResult[] = [];
  for (const batch of BATCHES) {
    for (const client of ['kafkajs', 'platformatic'] as const) {
      const before = await endSum();
      const r = await runClient({ client, brokers, topic: BENCH_TOPIC, batch, warmupSec: 2, durationSec: DURATION_SEC });
      // Every acknowledged record is in the topic, once (nothing else writes to it).
      const written = Number((await endSum()) - before);
      if (written !== r.acknowledged) throw new Error(`${client}: ${r.acknowledged} records acknowledged but the topic grew by ${written}`);
      runs.push(r);
      log(`  ${client.padEnd(12)} batch ${String(batch).padStart(4)}: ${Math.round(r.recordsPerSec)} records/s (${r.mbPerSec.toFixed(1)} MB/s), send p50 ${r.sendMs.p50.toFixed(1)} ms p99 ${r.sendMs.p99.toFixed(1)} ms, client CPU ${r.cpuUsPerRecord.toFixed(1)} µs/record, errors ${r.errors}`);
    }
  }
  await admin.close();
  const pick = (client: string, batch: number) => runs.find((r) => r.client === client && r.batch === batch)!;
  const head = 1000;
  const k = pick('kafkajs', head);
  const p = pick('platformatic', head);
  const small = { k: pick('kafkajs', 100), p: pick('platformatic', 100) };
  return {
    name: 'kafka-client',
    unit: 'records/s',
    value: Math.round(p.recordsPerSec),
    baseline: Math.round(k.recordsPerSec),
    ratio: round(p.recordsPerSec / k.recordsPerSec, 3),
    p50_ms: round(p.sendMs.p50),
    p99_ms: round(p.sendMs.p99),
    target: '– (decision: docs/decisions.md)',
    met: null,
    notes:
      `@platformatic/kafka 2.x (value) vs the kafkajs adapter (baseline), batches of ${head} records (~${Math.round(k.bytes / k.records)} B each, the gateway's Avro envelopes), idempotent, acks=-1, one send in flight, ${DURATION_SEC} s each; p50/p99 are per send of ${head}. ` +
      `Client CPU: kafkajs ${k.cpuUsPerRecord.toFixed(1)} µs/record, platformatic ${p.cpuUsPerRecord.toFixed(1)} µs/record. ` +
      `Batches of 100: kafkajs ${Math.round(small.k.recordsPerSec)} records/s (${small.k.cpuUsPerRecord.toFixed(1)} µs/record CPU, p99 ${small.k.sendMs.p99.toFixed(1)} ms), platformatic ${Math.round(small.p.recordsPerSec)} records/s (${small.p.cpuUsPerRecord.toFixed(1)} µs/record, p99 ${small.p.sendMs.p99.toFixed(1)} ms). ` +
      'Client process on core 0, broker unpinned. Checked: the topic grew by exactly the number of acknowledged records in every run.',
    detail: { runs },
  };
}
