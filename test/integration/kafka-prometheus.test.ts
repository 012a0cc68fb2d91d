/**
 * The SRE kit against a real Prometheus on the Kafka runtime's metric set: the built service (every role) on the
 * real broker, registry and Postgres, scraped every second by Debian's Prometheus evaluating ops/prometheus/rules;
 * the same short flow as the embedded test (test/helpers/sre-flow.ts). Every rule expression and every Grafana panel
 * query must parse and return series, the Kafka-only ones (produce durations, rebalances, restores) included.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type RunningSandbox } from '../sandbox/server.js';
import { freshDatabase, infraEnv, kafkaKit, uniqueId, type KafkaKit } from '../helpers/infra.js';
import { freePort } from '../sandbox/ports.js';
import { expressionProblems, labelBoundProblems, startPrometheus, type RunningPrometheus } from '../helpers/prometheus.js';
import type { ServiceProcess } from '../helpers/service-process.js';
import { flowLogProblems, runSreFlow, sandboxServiceEnv } from '../helpers/sre-flow.js';
import { killAll, startKafkaService } from './fixtures/processes.js';

let kit: KafkaKit;
let database: Awaited<ReturnType<typeof freshDatabase>>;
let sandbox: RunningSandbox;
let svc: ServiceProcess;
let prom: RunningPrometheus;

beforeAll(async () => {
  // KAFKA_GROUP_PREFIX, when given, leads the test's own group prefix (runs on a shared cluster stay apart).
  const given = process.env.KAFKA_GROUP_PREFIX;
  kit = await kafkaKit(infraEnv(), given ? `${uniqueId(given)}-` : undefined);
  database = await freshDatabase(infraEnv().DATABASE_URL);
  sandbox = await startSandbox({ port: 0 });
  const prefix = `${kit.groupPrefix}prom-`;
  await kit.startStagesAtEnd(prefix);
  svc = await startKafkaService(infraEnv(), {
    databaseUrl: database.url,
    groupPrefix: prefix,
    extra: sandboxServiceEnv(sandbox, await freePort()),
  });
  prom = await startPrometheus([new URL(svc.metricsUrl).host]);
});
afterAll(async () => {
  await prom?.stop();
  await killAll();
  await sandbox?.close();
  await kit?.close();
  await database?.drop();
});

describe('a real Prometheus scraping the service (Kafka runtime)', () => {
  it('every rule expression and panel query parses and returns series after the flow', async () => {
    const flow = await runSreFlow(svc.url, sandbox, prom, 60_000);
    const value = async (expr: string): Promise<number> => Number((await prom.query(expr))[0]?.value[1] ?? NaN);
    expect(await value('sum(events_ingested_total{outcome="accepted"})')).toBe(5);
    expect(await value('sum(events_ingested_total{outcome="rejected"})')).toBe(4);
    expect(await value('max(dependency_up{dependency="kafka"})')).toBe(1);
    expect(await value('max(dependency_up{dependency="postgres"})')).toBe(1);
    expect(await value('count(consumer_lag_records{stage=~".*forwarder"})')).toBeGreaterThan(0);
    expect(await value('max(dead_letters{stage="forwarder"})')).toBe(2);
    expect(await value('sum(replay_events_read_total)')).toBe(4);
    expect(await value('min(replay_slowest_progress_ratio)')).toBe(1);
    expect(await expressionProblems(prom, 'kafka')).toEqual([]);
    expect(await labelBoundProblems(prom)).toEqual([]);
    // The request id follows the events through Kafka to the forwarder's batch line; no secret or hash is logged.
    expect(flowLogProblems(svc.output(), flow)).toEqual([]);
  }, 180_000);
});
