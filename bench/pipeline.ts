/**
 * pipeline-embedded / pipeline-kafka: conversions per second from the gateway to the platform sandbox through every
 * stage (gateway → events.raw → dedupe → events.deduped → enrich → conversions.ready → forwarder → sandbox), and the
 * latency from the 2xx of a request to the sandbox receiving each of its records.
 *
 * Wiring, as `make demo` does it: the sandbox (its own process, on the load core) and the service (embedded:
 * SERVICE_ROLE=all, unpinned; Kafka: a process per role, unpinned); a workspace on the unthrottled plan, a live key, the forwarding setup purchase →
 * CompletePayment, the ad account connected through the OAuth flow. Every posted event is a `purchase` with ad consent
 * (70% web, 30% server, hashed identifiers): each becomes one platform record. Its event_id is its idempotency key
 * (`<run>-<request>-<index>`), which correlates the sandbox's records (`GET /_control/bench/received`,
 * test/sandbox/bench-control.ts) with the request that carried them.
 *
 * Method:
 *  1. calibration: a burst of CALIBRATION requests, delivered in full (warms every stage);
 *  2. max: a closed-loop burst sized for ~MAX_TARGET_SEC of pipeline work; throughput = conversions delivered /
 *     (last delivery − first 2xx). The gateway accepts faster than the stages drain, so this is the pipeline's drain
 *     rate while it shares its core with the gateway's intake. Over it, each process's CPU (/proc: every role's process, the sandbox, Postgres, the broker) per conversion
 *     delivered: where the pipeline's CPU goes, so what limits it is read off every run;
 *  3. half load: an open loop at 50% of that rate for HALF_SEC; latency of each conversion = sandbox received_at − its
 *     request's 2xx; p50/p99 over all of them.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { KafkaAdmin } from '../services/shared/kafka/admin.js';
import { KafkaConnection } from '../services/shared/kafka/client.js';
import { silentLogger } from '../services/shared/logger.js';
import { TOPIC_SPECS, Topics, type TopicName } from '../services/shared/topics.js';
import { GRAPH_SINK_STAGE } from '../services/enrich/identity/graph-sink.js';
import { EVENTS_PER_REQUEST } from './gateway.js';
import { freshDatabase, infraPidFiles, uniqueId } from './lib/infra.js';
import type { LoadResult } from './lib/load-worker.js';
import { percentile } from './lib/load-worker.js';
import {
  BENCH_PLAN_LIMITS,
  DIST,
  LOAD_CPU,
  SERVER_CPU,
  admin,
  runLoad,
  scrapeSums,
  scrapeTotals,
  sleep,
  startJsonLineChild,
  startServiceChild,
  type Child,
  type ServiceChild,
} from './lib/proc.js';
import { connectLikeABrowser } from '../test/sandbox/connect.js';
import { pidFromFile, postgresCpuReader, processCpuSec } from './lib/proc-cpu.js';
import { freshProfileDir, profiledRole, writeProfilePage } from './lib/thread-profiles.js';
import { round, type BenchResult } from './lib/results.js';

const CALIBRATION_REQUESTS = 20;
const MAX_TARGET_SEC = Number(process.env.BENCH_PIPELINE_MAX_SEC ?? 20);
const HALF_SEC = Number(process.env.BENCH_PIPELINE_HALF_SEC ?? 15);
/** Longest wait for a phase's conversions to arrive once posted. */
const DRAIN_TIMEOUT_MS = Number(process.env.BENCH_PIPELINE_DRAIN_MS ?? 60_000);
const CONNECTIONS = 8;
/**
 * The one-process layout (the embedded runtime, or BENCH_PIPELINE_SHAPE=all) free to use both cores, as deployed: its
 * main thread and the embedded store's thread run side by side (BENCH_PIPELINE_PIN=1 pins it to the server core).
 */
const PIN_SERVICE = process.env.BENCH_PIPELINE_PIN === '1';
/**
 * On Kafka, the deployment shape: a process per role, unpinned, so the scheduler spreads them over both cores
 * (BENCH_PIPELINE_SHAPE=all runs SERVICE_ROLE=all in one process instead, as the embedded runtime must: its log is
 * one process's database).
 */
const KAFKA_ROLES = process.env.BENCH_PIPELINE_SHAPE !== 'all';
/** The roles as the Compose file and the chart deploy them: the graph sink in a process of its own (GRAPH_SINK_ROLE). */
const ROLE_PROCESSES = ['console', 'gateway', 'dedupe', 'enrich', 'identity-sink', 'forwarder', 'refresher'] as const;

/** The service as one process (SERVICE_ROLE=all) or a process per role: where to send events, where to administer. */
interface ServiceShape {
  readonly layout: string;
  readonly ingestUrl: string;
  readonly adminUrl: string;
  readonly metricsUrls: readonly string[];
  readonly children: readonly ServiceChild[];
  stop(): Promise<void>;
  output(): string;
}

async function startShape(perRole: boolean, env: Record<string, string>, nodeArgs: (name: string) => string[]): Promise<ServiceShape> {
  const started: ServiceChild[] = [];
  const shape = (layout: string, ingest: ServiceChild, console_: ServiceChild): ServiceShape => ({
    layout,
    ingestUrl: ingest.url,
    adminUrl: console_.url,
    metricsUrls: started.map((c) => c.metricsUrl),
    children: started,
    stop: async () => void (await Promise.all(started.map((c) => c.stop()))),
    output: () => started.map((c, i) => `--- ${perRole ? ROLE_PROCESSES[i] : 'all'}\n${c.output().slice(-1500)}`).join('\n'),
  });
  try {
    if (!perRole) {
      started.push(await startServiceChild({ env, cpu: PIN_SERVICE ? SERVER_CPU : undefined, nodeArgs: nodeArgs('all') }));
      const where = PIN_SERVICE ? ` on core ${SERVER_CPU}` : ', unpinned: its main thread and the embedded store\'s thread spread over both cores by the scheduler';
      return shape(`SERVICE_ROLE=all in one process${where}`, started[0]!, started[0]!);
    }
    // One after the other: each process creates the service's topics and registers its schemas on start.
    for (const role of ROLE_PROCESSES) {
      started.push(await startServiceChild({ env: { ...env, SERVICE_ROLE: role, GRAPH_SINK_ROLE: 'identity-sink' }, nodeArgs: nodeArgs(role) }));
    }
    const of = (role: (typeof ROLE_PROCESSES)[number]) => started[ROLE_PROCESSES.indexOf(role)]!;
    return shape(`a process per role (${ROLE_PROCESSES.join(', ')}), unpinned: spread over both cores by the scheduler`, of('gateway'), of('console'));
  } catch (err) {
    await Promise.all(started.map((c) => c.stop()));
    throw err;
  }
}

export interface Delivered {
  /** event_id → sandbox received_at (epoch ms). */
  readonly at: Map<string, number>;
  readonly complete: boolean;
}

/** Reads the sandbox's arrivals from position `from` until `expected` event ids of `prefix` arrived, or a stall. */
export async function collect(controlUrl: string, prefix: string, expected: number, from: { pos: number }, timeoutMs = DRAIN_TIMEOUT_MS): Promise<Delivered> {
  const at = new Map<string, number>();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = (await (await fetch(`${controlUrl}/bench/received?after=${from.pos}&limit=50000`)).json()) as {
      next: number;
      items: Array<[string, number]>;
    };
    for (const [id, t] of r.items) if (id.startsWith(prefix) && !at.has(id)) at.set(id, t);
    from.pos = r.next;
    if (at.size >= expected) return { at, complete: true };
    if (Date.now() > deadline) return { at, complete: false };
    if (r.items.length < 50_000) await sleep(250);
  }
}

/** request index → epoch ms of its 2xx (from the load generator's completions). */
export function okTimes(load: LoadResult): Map<number, number> {
  const m = new Map<number, number>();
  for (const [i, t, status] of load.completions ?? []) if (status >= 200 && status < 300) m.set(i, t);
  return m;
}

/** Latencies (ms) of every delivered conversion of a phase: received_at − its request's 2xx. */
export function latencies(prefix: string, delivered: Delivered, oks: Map<number, number>): number[] {
  const out: number[] = [];
  for (const [id, t] of delivered.at) {
    const req = Number(id.slice(prefix.length).split('-')[0]);
    const ok = oks.get(req);
    if (ok !== undefined) out.push(t - ok);
  }
  return out;
}

export async function connect(base: string, controlAuthorize: (url: string) => Promise<void>): Promise<{ key: string; workspaceId: string }> {
  const call = admin(base);
  const ws = await call('POST', '/admin/v1/workspaces', { name: 'bench', plan: 'enterprise' });
  const key = await call('POST', `/admin/v1/workspaces/${ws.id}/api-keys`, { mode: 'live' });
  await call('PUT', `/admin/v1/workspaces/${ws.id}/forwarding`, {
    event_source: 'WEB',
    event_source_id: 'PIXELBENCH',
    pii_mode: 'hashed',
    click_window_days: 7,
    events: [{ name: 'purchase', platform_event: 'CompletePayment' }],
  });
  const { authorize_url: authorizeUrl } = await call('POST', `/admin/v1/workspaces/${ws.id}/connection`);
  await controlAuthorize(authorizeUrl);
  for (let i = 0; i < 50; i++) {
    const conn = await call('GET', `/admin/v1/workspaces/${ws.id}/connection`);
    if (conn.status === 'connected') return { key: key.key, workspaceId: ws.id };
    await sleep(100);
  }
  throw new Error('the OAuth connection did not become connected');
}

/** Connects like a browser through the service's connect link (test/sandbox/connect.ts); the callback must say yes. */
export async function authorize(url: string): Promise<void> {
  const page = await connectLikeABrowser(url);
  if (page.status !== 200) throw new Error(`the OAuth callback answered ${page.status}: ${page.html}`);
}

/** Starts the stages' consumer groups (with this run's prefix) at the current end of their topics. */
export async function startGroupsAtEnd(brokers: string[], prefix: string): Promise<void> {
  const connection = new KafkaConnection({ brokers, groupPrefix: prefix }, silentLogger);
  const kadmin = new KafkaAdmin(connection);
  try {
    // A fresh broker (BENCH_PRIVATE_KAFKA) has no topics yet: create them as the service would.
    await kadmin.ensureTopics(TOPIC_SPECS);
    const groups: Array<[string, TopicName]> = [
      ['dedupe', Topics.eventsRaw],
      ['enrich', Topics.eventsDeduped],
      // The graph sink of a fresh database starts with this run's changes, not every earlier run's.
      [GRAPH_SINK_STAGE, Topics.identityChanges],
      ['forwarder', Topics.conversionsReady],
    ];
    for (const [group, topic] of groups) {
      // Topics just created may not have elected their leaders yet (NOT_LEADER_OR_FOLLOWER): wait for them.
      let ends: Awaited<ReturnType<KafkaAdmin['endOffsets']>> | undefined;
      for (let attempt = 0; !ends; attempt++) {
        try {
          ends = await kadmin.endOffsets(topic);
        } catch (err) {
          if (attempt >= 40) throw err;
          await new Promise((r) => setTimeout(r, 250));
        }
      }
      await kadmin.setGroupOffsets(connection.groupId(group), topic, new Map([...ends].map(([p, o]) => [p, o.high])));
    }
    // The stages restore their changelogs from the start: on the bench's own broker they start from empty state, as
    // the Kafka Streams baseline does (its topics are its own). The shared broker's state belongs to others too.
    if (process.env.BENCH_PRIVATE_KAFKA === '1') {
      const state = new Set<string>([Topics.dedupeState, Topics.identityState, Topics.identityChanges]);
      await kadmin.recreateTopics(TOPIC_SPECS.filter((s) => state.has(s.name)));
    } else {
      console.error('  (shared broker: the stages restore the state earlier runs left in their changelogs; BENCH_PRIVATE_KAFKA=1 starts them empty)');
    }
  } finally {
    await kadmin.close();
  }
}

/** What a pipeline-level benchmark runs beside the service: the sandbox, the service's env, a fresh database on Kafka. */
export interface BenchSetting {
  readonly sandbox: Child;
  readonly info: { url: string; apiBase: string; authUrl: string; controlUrl: string; appId: string };
  readonly env: Record<string, string>;
  readonly fresh: Awaited<ReturnType<typeof freshDatabase>> | undefined;
  /** Stops the sandbox and drops the fresh database. */
  close(): Promise<void>;
}

/**
 * The platform sandbox in its own process (on the load core), and the service's variables wired to it; on Kafka a
 * database of its own and the stages' groups (with a fresh prefix) started at the end of their topics.
 */
export async function startBenchSetting(runtime: 'embedded' | 'kafka', runtimeEnv: Record<string, string>, groupPrefix: string, extra: Record<string, string> = {}): Promise<BenchSetting> {
  const { child: sandbox, info } = await startJsonLineChild<BenchSetting['info']>(
    LOAD_CPU,
    [process.execPath, '--max-old-space-size=4096', join(DIST, 'test', 'sandbox', 'main.js')],
    { SANDBOX_PORT: '0' },
    'platform sandbox',
  );
  const env: Record<string, string> = {
    ...runtimeEnv,
    PLAN_LIMITS: BENCH_PLAN_LIMITS,
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
    PLATFORM_API_BASE: info.apiBase,
    PLATFORM_AUTH_URL: info.authUrl,
    PLATFORM_APP_ID: info.appId,
    PLATFORM_APP_SECRET: 'sandbox-secret',
    ...extra,
  };
  const fresh = runtime === 'kafka' ? await freshDatabase(runtimeEnv.DATABASE_URL!) : undefined;
  if (fresh) {
    env.DATABASE_URL = fresh.url;
    env.KAFKA_GROUP_PREFIX = uniqueId(groupPrefix);
    await startGroupsAtEnd(runtimeEnv.KAFKA_BROKERS!.split(','), env.KAFKA_GROUP_PREFIX);
  }
  return {
    sandbox,
    info,
    env,
    fresh,
    async close() {
      await sandbox.stop();
      await fresh?.drop();
    },
  };
}

export async function benchPipeline(
  runtime: 'embedded' | 'kafka',
  runtimeEnv: Record<string, string>,
  log: (l: string) => void,
  opts: { profile?: boolean } = {},
): Promise<Omit<BenchResult, 'git_sha' | 'date'>> {
  const perRole = runtime === 'kafka' && KAFKA_ROLES;
  log(`pipeline-${runtime} (${perRole ? 'a process per role' : 'SERVICE_ROLE=all'}; sandbox in its own process)`);
  const setting = await startBenchSetting(runtime, runtimeEnv, 'bench-pl-');
  // Under the profiler (opts.profile) the numbers are for finding hot spots, not for the table.
  // A file per thread of the profiled process (the embedded store's thread is one of them).
  const profile = opts.profile ? freshProfileDir(`pipeline-${runtime}`) : undefined;
  // Per role, the enrich process is profiled (the stage that limits the drain; BENCH_PROFILE_ROLE names another);
  // else the one process.
  const profiled = perRole ? profiledRole() : 'all';
  const start = () =>
    startShape(perRole, setting.env, (role) =>
      profile && role === profiled ? [...profile.nodeArgs] : [],
    );
  try {
    return await withService(setting, start, log, async (service) => {
      log(`  service: ${service.layout}`);
      const { phase, base } = await phases(service, setting.info.controlUrl);

      // 1. calibration (and warm-up)
      const cal = await phase('c', { ...base, mode: 'closed', connections: CONNECTIONS, amount: CALIBRATION_REQUESTS }, CALIBRATION_REQUESTS);
      const calRate = rate(cal);
      log(`  calibration: ${cal.delivered.at.size}/${cal.accepted} delivered, ~${Math.round(calRate)} conversions/s`);

      // 2. max (with each stage's busy time over it, from the service's own metrics: which stage limits the drain)
      const stagesBefore = await stageTimes(service.metricsUrls);
      const cpu = cpuReaders(runtime, service, perRole, setting.sandbox);
      const cpuBefore = readAll(cpu);
      const maxRequests = Math.max(CALIBRATION_REQUESTS, Math.min(3000, Math.round((calRate * MAX_TARGET_SEC) / EVENTS_PER_REQUEST)));
      // The backlog drains in ~MAX_TARGET_SEC at the calibrated rate; allow three times that (at least the default).
      const max = await phase('m', { ...base, mode: 'closed', connections: CONNECTIONS, amount: maxRequests }, maxRequests, Math.max(DRAIN_TIMEOUT_MS, 3 * MAX_TARGET_SEC * 1000));
      const maxRate = rate(max);
      const maxLat = summary(latencies(max.prefix, max.delivered, max.oks));
      log(`  max: ${max.delivered.at.size}/${max.accepted} delivered (${maxRequests} requests), ${Math.round(maxRate)} conversions/s; gateway accepted at ${Math.round(max.result.okPerSec * EVENTS_PER_REQUEST)} events/s; latency under backlog p50 ${maxLat.p50} ms p99 ${maxLat.p99} ms`);
      const stagesAfter = await stageTimes(service.metricsUrls);
      const stages = stageDelta(stagesBefore, stagesAfter, spanSec(max));
      const store = storeDelta(stagesBefore, stagesAfter, spanSec(max), max.delivered.at.size);
      const cpuPerConversion = perConversion(cpuBefore, readAll(cpu), max.delivered.at.size);
      log(`  CPU per conversion over the max phase (µs): ${Object.entries(cpuPerConversion).map(([k, v]) => `${k} ${v}`).join(', ')}`);
      if (store) log(`  the embedded store's thread over the max phase: busy ${store.busySec} s (${Math.round(store.busyShare * 100)}% of it), ${store.usPerConversion} µs and ${store.statementsPerConversion} statements a conversion`);
      log(`  stages over the max phase (${round(spanSec(max), 1)} s): ${Object.entries(stages).map(([k, v]) => `${k} ${v.busySec} s busy (Kafka transactions ${v.kafkaCommitSec} s) in ${v.batches} batches (${v.recordsPerBatch} records/batch)`).join('; ')}`);

      // 3. half load
      const halfReqRate = maxRate / 2 / EVENTS_PER_REQUEST;
      const halfRequests = Math.max(4, Math.round(halfReqRate * HALF_SEC));
      const half = await phase('h', { ...base, mode: 'open', connections: 64, rate: halfReqRate, amount: halfRequests }, halfRequests);
      const halfLat = summary(latencies(half.prefix, half.delivered, half.oks));
      const halfRate = rate(half);
      log(`  half (${round(halfReqRate * EVENTS_PER_REQUEST)} conversions/s offered): ${half.delivered.at.size}/${half.accepted} delivered, 2xx→platform p50 ${halfLat.p50} ms, p99 ${halfLat.p99} ms (max ${halfLat.max} ms); gateway p99 ${half.result.latencyMs.p99} ms`);

      const complete = cal.delivered.complete && max.delivered.complete && half.delivered.complete;
      const kafka = runtime === 'kafka';
      const met = kafka ? maxRate >= 10_000 && halfLat.p99 < 2000 && complete : null;
      return {
        name: `pipeline-${runtime}`,
        unit: 'conversions/s',
        value: Math.round(maxRate),
        baseline: null,
        ratio: null,
        p50_ms: halfLat.p50,
        p99_ms: halfLat.p99,
        target: kafka ? '≥ 10,000 conversions/s, p99 < 2 s at half load' : '– (Kafka target applies; reported for comparison)',
        met,
        notes:
          `Gateway → dedupe → enrich → forwarder → platform sandbox, ${service.layout}, forwarder defaults (linger 200 ms, batches ≤ 1000). ` +
          `Max: ${maxRequests} requests × ${EVENTS_PER_REQUEST} purchase conversions posted closed-loop (${CONNECTIONS} connections); value = delivered / (last delivery − first 2xx)` +
          ` = ${max.delivered.at.size} / ${round(spanSec(max), 1)} s; the gateway took them at ${Math.round(max.result.okPerSec * EVENTS_PER_REQUEST)} events/s. ` +
          `Half load: open loop at ${round(halfReqRate, 2)} requests/s (${Math.round(halfReqRate * EVENTS_PER_REQUEST)} conversions/s) for ${HALF_SEC} s, delivered at ${Math.round(halfRate)}/s; p50/p99 = sandbox received_at − the request's 2xx, over ${halfLat.n} conversions. ` +
          (complete ? 'Every accepted conversion was delivered.' : `NOT every accepted conversion arrived within ${DRAIN_TIMEOUT_MS / 1000} s of its phase.`) +
          ` CPU per conversion over the max phase (µs, /proc): ${Object.entries(cpuPerConversion).map(([k, v]) => `${k} ${v}`).join(', ')}. ` +
          (store ? `The embedded store's thread (PGlite) over the max phase: busy ${Math.round(store.busyShare * 100)}% of it, ${store.usPerConversion} µs and ${store.statementsPerConversion} statements a conversion (embedded_store_busy_seconds_total). ` : '') +
          `What limits it: bench/README.md and bench/profiles/pipeline-${runtime}.md.`,
        detail: {
          layout: service.layout,
          calibration: phaseDetail(cal),
          max: { ...phaseDetail(max), latency: maxLat, stages, cpuUsPerConversion: cpuPerConversion, ...(store ? { store } : {}) },
          half: { ...phaseDetail(half), latency: halfLat, offeredPerSec: halfReqRate * EVENTS_PER_REQUEST },
        },
      };
    });
  } finally {
    if (profile) {
      const what = `pipeline-${runtime}: the service's ${perRole ? 'enrich process' : 'one process (SERVICE_ROLE=all)'} during the whole pipeline run`;
      writeProfilePage(`pipeline-${runtime}`, profile.dir, what, log);
    }
  }
}

/** The workspace connected; each phase posts its requests and waits for their conversions at the sandbox. */
async function phases(service: ServiceShape, controlUrl: string) {
  const { key } = await connect(service.adminUrl, authorize);
  const headers = { authorization: `Bearer ${key}` };
  const run = randomBytes(3).toString('hex');
  const pos = { pos: 0 };
  const phase = async (name: string, load: Omit<Parameters<typeof runLoad>[0], 'bodies'>, requests: number, drainMs = DRAIN_TIMEOUT_MS) => {
    const prefix = `${run}${name}-`;
    const result = await runLoad({ ...load, bodies: { count: requests, events: EVENTS_PER_REQUEST, seed: name.charCodeAt(0), conversionsOnly: true, keyPrefix: `${run}${name}` } });
    const accepted = result.ok * EVENTS_PER_REQUEST;
    const delivered = await collect(controlUrl, prefix, accepted, pos, drainMs);
    return { prefix, result, accepted, delivered, oks: okTimes(result) };
  };
  const base = { url: service.ingestUrl, path: '/v1/events', headers, recordCompletions: true } as const;
  return { phase, base };
}

/** Requests of the broker's warm-up: ~70 s of the pipeline's work on these two cores. */
const WARM_UP_REQUESTS = Number(process.env.BENCH_BROKER_WARM_UP_REQUESTS ?? 2400);

/**
 * Warms the broker's JIT before the Kafka pipelines are measured: the pipeline's own work (every role, transactions,
 * offsets, fetches) posted closed-loop and delivered, then stopped; nothing of it is reported. A broker in service runs
 * for weeks, its code long compiled; a fresh one (BENCH_PRIVATE_KAFKA=1 starts one per run) compiles for minutes, on
 * the two cores the stages share. In pipeline-kafka on a fresh broker its compiler threads took 49% of its CPU (broker
 * 123 µs a conversion); after 32 s of warm-up 45% (85 µs); after 70 s 41% (61 µs); on one that had served a few runs
 * ~10% (43 µs). The Kafka Streams baseline runs on the warmed broker too.
 */
export async function warmUpBroker(runtimeEnv: Record<string, string>, log: (l: string) => void): Promise<void> {
  const started = Date.now();
  const setting = await startBenchSetting('kafka', runtimeEnv, 'bench-warm-');
  await withService(setting, () => startShape(KAFKA_ROLES, setting.env, () => []), log, async (service) => {
    const { phase, base } = await phases(service, setting.info.controlUrl);
    const w = await phase('w', { ...base, mode: 'closed', connections: CONNECTIONS, amount: WARM_UP_REQUESTS }, WARM_UP_REQUESTS, 3 * DRAIN_TIMEOUT_MS);
    log(`broker warm-up: ${w.delivered.at.size}/${w.accepted} conversions through the pipeline in ${round((Date.now() - started) / 1000, 1)} s (not measured)`);
  });
}

/** `body` with the service started in `setting`; its output logged when body fails; the service and the setting stopped after. */
async function withService<T>(setting: BenchSetting, start: () => Promise<ServiceShape>, log: (l: string) => void, body: (service: ServiceShape) => Promise<T>): Promise<T> {
  let service: ServiceShape | undefined;
  try {
    service = await start();
    return await body(service);
  } catch (err) {
    if (service) log(`  service output:\n${service.output()}`);
    throw err;
  } finally {
    await service?.stop();
    await setting.close();
  }
}

/**
 * CPU seconds so far of each process the pipeline runs on: the service's (per role, or the one), the sandbox, Postgres
 * and the broker (Kafka). The embedded runtime's store is a thread of the service's process and counted with it.
 */
function cpuReaders(runtime: 'embedded' | 'kafka', service: ServiceShape, perRole: boolean, sandbox: Child): Record<string, () => number> {
  const of = (c: Child) => () => (c.child.pid ? processCpuSec(c.child.pid) : 0);
  const readers: Record<string, () => number> = Object.fromEntries(service.children.map((c, i) => [perRole ? ROLE_PROCESSES[i]! : 'service', of(c)]));
  readers.sandbox = of(sandbox);
  const pids = infraPidFiles();
  if (runtime === 'kafka') {
    readers.postgres = postgresCpuReader(pidFromFile(pids.postgres));
    const broker = pidFromFile(pids.broker);
    if (broker) readers.broker = () => processCpuSec(broker);
  }
  return readers;
}

const readAll = (readers: Record<string, () => number>): Record<string, number> => Object.fromEntries(Object.entries(readers).map(([k, read]) => [k, read()]));

/** µs of CPU per conversion of each process between two readings, and their total. */
function perConversion(before: Record<string, number>, after: Record<string, number>, conversions: number): Record<string, number> {
  const out: Record<string, number> = {};
  let total = 0;
  for (const k of Object.keys(after)) {
    const us = ((after[k]! - (before[k] ?? 0)) * 1e6) / Math.max(1, conversions);
    out[k] = Math.round(us);
    total += us;
  }
  out.total = Math.round(total);
  return out;
}

type Phase = { result: LoadResult; accepted: number; delivered: Delivered; oks: Map<number, number> };

/** Per stage: seconds inside batches, batches and records so far (stage_batch_duration_seconds, stage_records_total). */
/** Each stage's busy time, batches and records so far, summed over the service's processes. */
async function stageTimes(metricsUrls: readonly string[]): Promise<Map<string, number>> {
  const sum = new Map<string, number>();
  for (const url of metricsUrls) {
    const totals = await scrapeTotals(url, STORE_TOTALS);
    for (const [k, v] of [...(await scrapeSums(url, 'stage')), ...(await scrapeSums(url, 'producer')), ...totals]) sum.set(k, (sum.get(k) ?? 0) + v);
  }
  return sum;
}

/** The embedded store's thread: its busy time and statements (shared/db/pglite.ts); absent on Kafka. */
const STORE_TOTALS = ['embedded_store_busy_seconds_total', 'embedded_store_statements_total'];

/**
 * The embedded store's thread over a phase: busy share of the span (1 = saturated, the runtime's ceiling), its
 * busy time and statements a conversion. Null on Kafka (no embedded store).
 */
function storeDelta(before: Map<string, number>, after: Map<string, number>, spanSec: number, conversions: number) {
  const d = (k: string) => (after.get(k) ?? 0) - (before.get(k) ?? 0);
  const busy = d('embedded_store_busy_seconds_total');
  const statements = d('embedded_store_statements_total');
  // On Kafka the counters exist at 0: no statement ran on an embedded store.
  if (statements === 0 || conversions === 0) return null;
  return {
    busySec: round(busy, 2),
    busyShare: round(busy / spanSec, 2),
    usPerConversion: Math.round((busy * 1e6) / conversions),
    statements,
    statementsPerConversion: round(statements / conversions, 3),
  };
}

function stageDelta(before: Map<string, number>, after: Map<string, number>, spanSec: number) {
  const d = (k: string) => (after.get(k) ?? 0) - (before.get(k) ?? 0);
  const out: Record<string, { busySec: number; busyShare: number; kafkaCommitSec: number; batches: number; records: number; recordsPerBatch: number }> = {};
  for (const stage of ['dedupe', 'enrich', 'forwarder']) {
    const busy = d(`stage_batch_duration_seconds_sum|${stage}`);
    const batches = d(`stage_batch_duration_seconds_count|${stage}`);
    const records = d(`stage_records_total|${stage}`);
    const kafkaCommitSec = round(d(`kafka_produce_duration_seconds_sum|${stage}`), 2);
    out[stage] = { busySec: round(busy, 2), busyShare: round(busy / spanSec, 2), kafkaCommitSec, batches, records, recordsPerBatch: batches > 0 ? Math.round(records / batches) : 0 };
  }
  return out;
}

function spanSec(p: Phase): number {
  const firstOk = Math.min(...p.oks.values());
  const last = Math.max(...p.delivered.at.values());
  return (last - firstOk) / 1000;
}

function rate(p: Phase): number {
  return p.delivered.at.size / spanSec(p);
}

export function summary(values: number[]) {
  const a = Float64Array.from(values).sort();
  return { n: a.length, p50: round(percentile(a, 50), 1), p90: round(percentile(a, 90), 1), p99: round(percentile(a, 99), 1), max: round(a[a.length - 1] ?? NaN, 1) };
}

function phaseDetail(p: Phase) {
  return {
    requests: p.result.requests,
    accepted: p.accepted,
    delivered: p.delivered.at.size,
    complete: p.delivered.complete,
    gatewayOkPerSec: round(p.result.okPerSec, 2),
    gatewayLatencyMs: p.result.latencyMs,
    statuses: p.result.statuses,
    spanSec: round(spanSec(p), 2),
  };
}
