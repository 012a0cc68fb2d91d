/**
 * gateway-embedded / gateway-kafka: events accepted per second on endpoint A with 100-event batches, against a bare
 * Fastify server (bench/baseline-server.ts) measured in the same run; p50/p99 at half of each one's maximum rate.
 *
 * Method, for the service and the baseline alike:
 *  1. warm-up: closed loop, WARMUP_SEC (JIT, connection pools, caches);
 *  2. max: closed loop with CONNECTIONS connections for MAX_SEC (autocannon) → the maximum requests per second;
 *  3. half load: open loop at 50% of that maximum, HALF_RUNS windows of HALF_SEC each → p50/p99 latency: the median
 *     window's (each window's figures are in the result file). On a shared machine one window can catch another
 *     job's burst; the median of three does not report that burst as the service's tail.
 * The service runs SERVICE_ROLE=gateway (the stages would otherwise share its core and drain events.raw), pinned to
 * core 0; the load generator runs on core 1.
 */
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { LoadResult } from './lib/load-worker.js';
import { freshDatabase, uniqueId } from './lib/infra.js';
import { freshProfileDir, writeProfilePage } from './lib/thread-profiles.js';
import {
  BENCH_PLAN_LIMITS,
  DIST,
  LOAD_CPU,
  SERVER_CPU,
  admin,
  runLoad,
  startJsonLineChild,
  startServiceChild,
  type ServiceChild,
} from './lib/proc.js';
import { round } from './lib/results.js';

export const EVENTS_PER_REQUEST = 100;
export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const WARMUP_SEC = Number(process.env.BENCH_WARMUP_SEC ?? 4);
const MAX_SEC = Number(process.env.BENCH_MAX_SEC ?? 10);
const HALF_SEC = Number(process.env.BENCH_HALF_SEC ?? 6);
const HALF_RUNS = Number(process.env.BENCH_HALF_RUNS ?? 3);
/** Distinct bodies cycled by the load generator (idempotency keys repeat after this many requests; the gateway does not dedupe). */
const BODY_POOL = 64;

export interface Measured {
  /** CPU time of the server process per accepted event during the max phase (µs; less noisy than rates on a shared machine). */
  readonly cpuUsPerEvent: number | null;
  readonly max: LoadResult;
  /** The median window (by p99) of the half-load runs. */
  readonly half: LoadResult;
  readonly halfRuns: ReadonlyArray<{ readonly latencyMs: LoadResult['latencyMs']; readonly ok: number; readonly requests: number; readonly sendLagMs?: LoadResult['sendLagMs'] }>;
  /** Events accepted per second at the maximum. */
  readonly eventsPerSec: number;
}

const body = (seed: number) => ({ count: BODY_POOL, events: EVENTS_PER_REQUEST, seed });

/** Warm-up, max, half load against one target. */
export async function measure(url: string, headers: Record<string, string>, log: (l: string) => void, pid?: number): Promise<Measured> {
  await runLoad({ mode: 'closed', url, path: '/v1/events', headers, bodies: body(7), connections: CONNECTIONS, durationSec: WARMUP_SEC });
  const cpu0 = cpuSeconds(pid);
  const max = await runLoad({ mode: 'closed', url, path: '/v1/events', headers, bodies: body(42), connections: CONNECTIONS, durationSec: MAX_SEC });
  const cpu1 = cpuSeconds(pid);
  if (max.ok === 0) throw new Error(`no request succeeded: ${JSON.stringify(max.statuses)}`);
  const cpuUsPerEvent = cpu0 !== null && cpu1 !== null ? round(((cpu1 - cpu0) * 1e6) / (max.ok * EVENTS_PER_REQUEST)) : null;
  log(`  max: ${round(max.okPerSec)} req/s (${Math.round(max.okPerSec * EVENTS_PER_REQUEST)} events/s), p50 ${max.latencyMs.p50} ms, p99 ${max.latencyMs.p99} ms, server CPU ${cpuUsPerEvent} µs/event, statuses ${JSON.stringify(max.statuses)}`);
  const rate = max.okPerSec / 2;
  const runs: LoadResult[] = [];
  for (let i = 0; i < HALF_RUNS; i++) {
    runs.push(await runLoad({ mode: 'open', url, path: '/v1/events', headers, bodies: body(43 + i), connections: 256, rate, durationSec: HALF_SEC }));
  }
  const byP99 = [...runs].sort((a, b) => a.latencyMs.p99 - b.latencyMs.p99);
  const half = byP99[Math.floor(byP99.length / 2)]!;
  const halfRuns = runs.map((r) => ({ latencyMs: r.latencyMs, ok: r.ok, requests: r.requests, sendLagMs: r.sendLagMs }));
  log(
    `  half (${round(rate)} req/s, ${HALF_RUNS} × ${HALF_SEC} s): median window p50 ${half.latencyMs.p50} ms, p99 ${half.latencyMs.p99} ms; ` +
      `windows' p99 ${runs.map((r) => r.latencyMs.p99).join(' / ')} ms; generator lag p99 ${half.sendLagMs?.p99} ms; statuses ${JSON.stringify(half.statuses)}`,
  );
  return { cpuUsPerEvent, max, half, halfRuns, eventsPerSec: max.okPerSec * EVENTS_PER_REQUEST };
}

/** user + system CPU seconds of a process so far (Linux /proc), or null. */
export function cpuSeconds(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[11], fields[12]: utime, stime in clock ticks (USER_HZ = 100 on Linux).
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return null;
  }
}

export async function measureBaseline(log: (l: string) => void): Promise<Measured> {
  const { child, info } = await startJsonLineChild<{ url: string }>(SERVER_CPU, [process.execPath, join(DIST, 'bench', 'baseline-server.js')], {}, 'baseline');
  try {
    log('baseline (bare Fastify: parse, 202)');
    return await measure(info.url, {}, log, child.child.pid);
  } finally {
    await child.stop();
  }
}

/** Creates a workspace on the unthrottled plan and one live key, through a short-lived console process. */
export async function setupWorkspace(env: Record<string, string>, dataDir?: string): Promise<{ dataDir: string; key: string; workspaceId: string }> {
  const console_ = await startServiceChild({ env: { ...env, SERVICE_ROLE: 'console' }, dataDir });
  try {
    const call = admin(console_.url);
    const ws = await call('POST', '/admin/v1/workspaces', { name: 'bench', plan: 'enterprise' });
    const key = await call('POST', `/admin/v1/workspaces/${ws.id}/api-keys`, { mode: 'live' });
    return { dataDir: console_.dataDir, key: key.key, workspaceId: ws.id };
  } finally {
    await console_.stop();
  }
}

/**
 * The variables of a gateway benchmark's service, unthrottled; on Kafka also a database of the run's own (workspace,
 * key) and a group prefix of its own. `fresh` is that database, for the caller to drop.
 */
export async function gatewayBenchEnv(
  runtime: 'embedded' | 'kafka',
  runtimeEnv: Record<string, string>,
  groupPrefix: string,
): Promise<{ env: Record<string, string>; fresh: Awaited<ReturnType<typeof freshDatabase>> | undefined }> {
  const fresh = runtime === 'kafka' ? await freshDatabase(runtimeEnv.DATABASE_URL!) : undefined;
  const env: Record<string, string> = { ...runtimeEnv, PLAN_LIMITS: BENCH_PLAN_LIMITS };
  if (fresh) {
    env.DATABASE_URL = fresh.url;
    env.KAFKA_GROUP_PREFIX = uniqueId(groupPrefix);
  }
  return { env, fresh };
}

export interface GatewayRun {
  readonly service: Measured;
  readonly profile?: { readonly raw: string; readonly markdown: string };
  /** Kafka only: the same gateway with the proposed adapter changes (bench/lib/gateway-whatif.ts). */
  readonly whatif?: Measured;
}

export async function benchGateway(
  runtime: 'embedded' | 'kafka',
  runtimeEnv: Record<string, string>,
  log: (l: string) => void,
  opts: { profile?: boolean; whatif?: boolean } = {},
): Promise<GatewayRun> {
  const { env, fresh } = await gatewayBenchEnv(runtime, runtimeEnv, 'bench-gw-');
  const { dataDir, key } = await setupWorkspace(env);
  const headers = { authorization: `Bearer ${key}` };
  let service: ServiceChild | undefined = await startServiceChild({ env: { ...env, SERVICE_ROLE: 'gateway' }, dataDir, cpu: SERVER_CPU });
  let measured: Measured;
  try {
    log(`gateway-${runtime} (SERVICE_ROLE=gateway)`);
    measured = await measure(service.url, headers, log, service.child.pid);
  } finally {
    await service.stop();
    service = undefined;
  }
  const gatewayEnv = { ...env, SERVICE_ROLE: 'gateway' };
  const profile = opts.profile ? await profileRun(`gateway-${runtime}`, gatewayEnv, dataDir, headers, log) : undefined;
  let whatif: Measured | undefined;
  if (runtime === 'kafka' && opts.whatif !== false) {
    const entry = join(DIST, 'bench', 'lib', 'gateway-whatif.js');
    const exp = await startServiceChild({ env: gatewayEnv, dataDir, cpu: SERVER_CPU, entry });
    try {
      log('gateway-kafka what-if (bench/lib/gateway-whatif.ts: one-pass Avro encoding + @platformatic/kafka producer)');
      whatif = await measure(exp.url, headers, log, exp.child.pid);
    } finally {
      await exp.stop();
    }
    if (opts.profile) await profileRun('gateway-kafka-whatif', gatewayEnv, dataDir, headers, log, entry);
  }
  rmSync(dataDir, { recursive: true, force: true });
  await fresh?.drop();
  return { service: measured, profile, whatif };
}

/** A separate run under the profiler (its overhead must not touch the measured numbers): closed loop at max. */
async function profileRun(
  name: string,
  env: Record<string, string>,
  dataDir: string,
  headers: Record<string, string>,
  log: (l: string) => void,
  entry?: string,
): Promise<{ raw: string; markdown: string }> {
  // A file per thread (the embedded log's store runs on a thread of its own).
  const profile = freshProfileDir(name);
  const profiled = await startServiceChild({ env, dataDir, cpu: SERVER_CPU, entry, nodeArgs: [...profile.nodeArgs] });
  try {
    await runLoad({ mode: 'closed', url: profiled.url, path: '/v1/events', headers, bodies: body(44), connections: CONNECTIONS, durationSec: MAX_SEC }, LOAD_CPU);
  } finally {
    await profiled.stop();
  }
  const title = `${name}: ${MAX_SEC} s closed loop, ${CONNECTIONS} connections, 100-event batches (under --cpu-prof)`;
  return { raw: profile.dir, markdown: writeProfilePage(name, profile.dir, title, log) };
}
