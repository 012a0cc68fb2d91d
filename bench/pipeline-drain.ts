/**
 * pipeline-drain-kafka: how fast the service's stages drain a backlog, side by side with a Kafka Streams application
 * doing the same work on the same records on the same broker (bench/baselines/kstreams/).
 *
 *  1. A fresh database and stage groups (new prefix) at the end of their topics; a workspace, a live key and the
 *     forwarding setup purchase → CompletePayment through the admin API (a SERVICE_ROLE=console process).
 *  2. Preload: BENCH_DRAIN_EVENTS purchases (bench/lib/events.ts, 100-event requests, `people` distinct people, 5%
 *     of them repeating an earlier event's idempotency key) posted to a SERVICE_ROLE=gateway process, which writes
 *     them to events.raw as it does in production (Avro through the registry). Console and gateway are then stopped.
 *  3. The baseline: the same records copied byte for byte into a topic of its own, the people's identifiers into its
 *     identity table; the Kafka Streams app started; its output read read_committed until every unique event is there.
 *  4. Ours: one SERVICE_ROLE=dedupe process and one SERVICE_ROLE=identity-sink (the graph sink) on core 0, one
 *     SERVICE_ROLE=enrich on core 1 (the deployment shape: a process per role, GRAPH_SINK_ROLE=identity-sink as the
 *     Compose file and the chart run it), draining events.raw → events.deduped → conversions.ready with exactly-once;
 *     conversions.ready read read_committed until every unique event's conversion is there.
 * Each side: records/s = unique events / (last committed output − its processes' ready signal); CPU from /proc of
 * its processes, of Postgres and of the broker, over the same window and per tenth of the drain (tenths by output
 * count; the first starts at the last sample before the first output). Start-up (spawn → ready) is kept beside.
 * Profiled (`--profile-pipeline`): our enrich process (BENCH_PROFILE_ROLE: dedupe or identity-sink instead) runs under
 * --cpu-prof, summarised as bench/profiles/<shape's name>.md; the profiler slows it, so that run writes no result.
 */
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KafkaAdmin } from '../services/shared/kafka/admin.js';
import { KafkaConnection } from '../services/shared/kafka/client.js';
import { topicEnds } from '../services/stream/kafka/reader.js';
import { silentLogger } from '../services/shared/logger.js';
import { Topics } from '../services/shared/topics.js';
import { EVENTS_PER_REQUEST } from './gateway.js';
import { bodyPeople, repeatedKey } from './lib/events.js';
import { freshDatabase, infraPidFiles, uniqueId } from './lib/infra.js';
import { LOAD_CPU, REPO_ROOT, SERVER_CPU, BENCH_PLAN_LIMITS, admin, runLoad, sleep, spawnChild, startServiceChild, type Child, type ServiceChild } from './lib/proc.js';
import { pidFromFile, postgresCpuReader, processCpuSec } from './lib/proc-cpu.js';
import { round, type BenchResult } from './lib/results.js';
import { tenthWindows, window, type Cpu, type Sample, type Window } from './lib/drain-windows.js';
import { startGroupsAtEnd } from './pipeline.js';
import { freshProfileDir, profiledRole, writeProfilePage } from './lib/thread-profiles.js';

export const DRAIN_EVENTS = Number(process.env.BENCH_DRAIN_EVENTS ?? 500_000);
/** Longest a side may take to drain before its run is cut off and reported as incomplete. */
const MAX_DRAIN_SEC = Number(process.env.BENCH_DRAIN_MAX_SEC ?? 180);
/** Extra Node flags for our two stage processes, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile a drain. */
const STAGE_NODE_ARGS = (process.env.BENCH_DRAIN_NODE_ARGS ?? '').split(' ').filter(Boolean);
const REPEAT_SHARE = 0.05;
const SAMPLE_MS = 100;
const KSTREAMS_DIR = join(REPO_ROOT, 'bench', 'baselines', 'kstreams');
const EVENT_SOURCE_ID = 'PIXELBENCH';

export interface DrainShape {
  readonly name: string;
  readonly people: number;
  /** The long-history run also holds the last tenth's CPU per record against the first's. */
  readonly tenthTarget: boolean;
}

export const DRAIN_SHAPES: readonly DrainShape[] = [
  { name: 'pipeline-drain-kafka', people: 100_000, tenthTarget: false },
  { name: 'pipeline-drain-kafka-500-people', people: 500, tenthTarget: true },
];

/**
 * Builds the baseline's jar when its sources are newer than the build (`make bench` does it first): offline when
 * ~/.m2 already holds every artifact, else from Maven Central.
 */
export function buildKstreams(log: (l: string) => void): void {
  const newest = (dir: string): number =>
    Math.max(0, ...readdirSync(dir, { withFileTypes: true }).map((e) => (e.isDirectory() ? newest(join(dir, e.name)) : statSync(join(dir, e.name)).mtimeMs)));
  const jar = join(KSTREAMS_DIR, 'target', 'kstreams-baseline-1.jar');
  let built = 0;
  try {
    built = statSync(jar).mtimeMs;
  } catch {
    // not built yet
  }
  if (built > Math.max(newest(join(KSTREAMS_DIR, 'src')), statSync(join(KSTREAMS_DIR, 'pom.xml')).mtimeMs)) return;
  const args = ['-B', '-q', 'package', '-DskipTests', `-Dkafka.version=${kafkaVersion()}`];
  log(`  building the Kafka Streams baseline (mvn, kafka ${kafkaVersion()})`);
  try {
    execFileSync('mvn', ['-o', ...args], { cwd: KSTREAMS_DIR, stdio: 'pipe' });
  } catch {
    execFileSync('mvn', args, { cwd: KSTREAMS_DIR, stdio: 'pipe' });
  }
}

/** The broker's version, as infra/local/lib.sh pins it (KAFKA_VERSION overrides it there too). */
function kafkaVersion(): string {
  return (
    process.env.KAFKA_VERSION ??
    execFileSync('bash', ['-c', 'source infra/local/lib.sh >/dev/null 2>&1; echo "$KAFKA_VERSION"'], { cwd: REPO_ROOT, encoding: 'utf8' }).trim()
  );
}

/** A JVM running the baseline's jar (bench/baselines/kstreams/target). */
function java(cmd: readonly string[], env: Record<string, string>, heap = '-Xmx512m'): Child {
  const cp = `${join(KSTREAMS_DIR, 'target', 'classes')}:${join(KSTREAMS_DIR, 'target', 'lib', '*')}`;
  return spawnChild(undefined, ['java', heap, '-cp', cp, 'bench.kstreams.Main', ...cmd], env);
}

/** Runs a baseline tool to its end; resolves its last JSON line. */
async function tool(cmd: readonly string[], env: Record<string, string>): Promise<any> {
  const c = java(cmd, env);
  const code = await new Promise<number | null>((r) => c.child.once('exit', (x) => r(x)));
  const line = c.output().split('\n').filter((l) => l.startsWith('{')).pop();
  if (code !== 0 || !line) throw new Error(`kstreams tool ${cmd[0]} failed (${code}):\n${c.output().slice(-3000)}`);
  return JSON.parse(line);
}

/** The committed-output counter (Tools.watch): `n` as it moves, `done` when the expected count is there. */
interface Watch {
  readonly child: Child;
  n: number;
  done?: { t: number; n: number; distinct: number };
}

async function startWatch(topic: string, expected: number, partitions: number, keyPrefix: string, env: Record<string, string>): Promise<Watch> {
  const child = java(['watch', topic, String(expected), String(partitions), keyPrefix], env, '-Xmx1g');
  const w: Watch = { child, n: 0 };
  let ready = false;
  let buf = '';
  child.child.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (!line.startsWith('{')) continue;
      const m = JSON.parse(line);
      if (m.ready) ready = true;
      if (typeof m.n === 'number') w.n = m.n;
      if (m.done) w.done = { t: m.t, n: m.n, distinct: m.distinct };
    }
  });
  const deadline = Date.now() + 60_000;
  while (!ready) {
    if (child.child.exitCode !== null || Date.now() > deadline) throw new Error(`watch of ${topic} did not start:\n${child.output().slice(-3000)}`);
    await sleep(50);
  }
  return w;
}

/** CPU seconds so far of each named reader, every SAMPLE_MS with the watch's count, until stopped. */
function sampler(watch: Watch, readers: Record<string, () => number>) {
  const samples: Sample[] = [];
  const take = () => {
    const cpu: Cpu = {};
    for (const [k, read] of Object.entries(readers)) cpu[k] = read();
    samples.push({ t: Date.now(), n: watch.n, cpu });
  };
  take();
  const timer = setInterval(take, SAMPLE_MS);
  return {
    samples,
    stop() {
      clearInterval(timer);
      take();
    },
  };
}

interface Side {
  readonly label: string;
  /** Conversions / (last committed output − ready): the headline. */
  readonly recordsPerSec: number;
  readonly complete: boolean;
  readonly outputs: number;
  readonly distinct: number;
  /** Ready → last committed output. */
  readonly spanSec: number;
  /** Spawn → ready (the processes' start-up, not in the headline), spawn → first output. */
  readonly startupSec: number;
  readonly spawnToFirstOutputSec: number | null;
  /** Including start-up: conversions / (last committed output − spawn). */
  readonly recordsPerSecFromSpawn: number;
  /** From ready to the last output (the headline's window), and from the spawn. */
  readonly overall: Window;
  readonly overallFromSpawn: Window;
  readonly tenths: Window[];
}

/**
 * Runs one side. `start` spawns its processes and resolves them once they say they are ready (the stage processes'
 * /readyz, Kafka Streams' RUNNING state): that moment starts the headline's clock. The spawn, and the CPU of
 * start-up, are kept beside it.
 */
async function drainSide(
  label: string,
  expected: number,
  watch: Watch,
  readers: Record<string, () => number>,
  counted: readonly string[],
  start: () => Promise<Child[]>,
  log: (l: string) => void,
): Promise<Side> {
  const s = sampler(watch, readers);
  const spawnedAt = Date.now();
  const procs = await start();
  const readyAt = Date.now();
  const readySample = s.samples.length;
  const deadline = readyAt + MAX_DRAIN_SEC * 1000;
  let lastLog = readyAt;
  while (!watch.done && Date.now() < deadline) {
    if (watch.child.child.exitCode !== null) throw new Error(`${label}: the watch exited:\n${watch.child.output().slice(-3000)}`);
    const dead = procs.find((p) => p.child.exitCode !== null);
    if (dead) {
      s.stop();
      throw new Error(`${label}: a process exited (${dead.child.exitCode}) before the drain ended:\n${dead.output().slice(-3000)}`);
    }
    if (Date.now() - lastLog > 30_000) {
      lastLog = Date.now();
      log(`    ${label}: ${watch.n}/${expected} after ${Math.round((lastLog - readyAt) / 1000)} s`);
    }
    await sleep(SAMPLE_MS);
  }
  s.stop();
  await watch.child.stop(2000);
  const samples = s.samples;
  const end = samples[samples.length - 1]!;
  const outputs = watch.done?.n ?? end.n;
  const lastAt = watch.done?.t ?? end.t;
  const spanSec = (lastAt - readyAt) / 1000;
  // The sample taken nearest after the ready signal opens the headline's CPU window.
  const ready = samples[Math.min(readySample, samples.length - 1)]!;
  const first = samples.findIndex((x) => x.n > 0);
  const tenths = tenthWindows(samples, expected, counted);
  return {
    label,
    recordsPerSec: Math.round(outputs / spanSec),
    complete: watch.done !== undefined,
    outputs,
    distinct: watch.done?.distinct ?? outputs,
    spanSec: round(spanSec, 2),
    startupSec: round((readyAt - spawnedAt) / 1000, 2),
    spawnToFirstOutputSec: first > 0 ? round((samples[first]!.t - spawnedAt) / 1000, 2) : null,
    recordsPerSecFromSpawn: Math.round(outputs / ((lastAt - spawnedAt) / 1000)),
    overall: window(ready, end, outputs - ready.n, counted),
    overallFromSpawn: window(samples[0]!, end, outputs, counted),
    tenths,
  };
}

/** Resolves when a Kafka Streams process first prints its RUNNING state (Pipeline's state listener). */
async function untilRunning(jvm: Child, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!jvm.output().includes('{"state":"RUNNING"}')) {
    if (jvm.child.exitCode !== null || Date.now() > deadline) throw new Error(`Kafka Streams did not reach RUNNING:\n${jvm.output().slice(-3000)}`);
    await sleep(20);
  }
}

/** How many distinct idempotency keys the preload holds (load-worker's keys with REPEAT_SHARE). */
function uniqueEvents(requests: number): number {
  let repeats = 0;
  for (let q = 0; q < requests; q++) for (let i = 0; i < EVENTS_PER_REQUEST; i++) if (repeatedKey(q, i, REPEAT_SHARE)) repeats++;
  return requests * EVENTS_PER_REQUEST - repeats;
}

/** The identity table of the baseline: every identifier of a person (as the gateway writes it) → the person. */
function identityTable(seed: number, people: number): string {
  const lines: string[] = [];
  bodyPeople(seed, people).forEach((p, i) => {
    const person = `person-${i}`;
    lines.push(`${p.user}\t${person}`, `${p.client_id}\t${person}`, `${p.email}\t${person}`);
    if (p.email_canonical) lines.push(`${p.email_canonical}\t${person}`);
    if (p.phone) lines.push(`${p.phone.sha256_e164}\t${person}`);
  });
  return `${lines.join('\n')}\n`;
}

/** The stage roles of our side of the drain, each a process of its own. */
const DRAIN_ROLES = ['dedupe', 'enrich', 'identity-sink'] as const;

export async function benchPipelineDrain(
  shape: DrainShape,
  runtimeEnv: Record<string, string>,
  log: (l: string) => void,
  opts: { profile?: boolean } = {},
): Promise<Omit<BenchResult, 'git_sha' | 'date'>> {
  const profiled = profiledRole();
  if (opts.profile && !(DRAIN_ROLES as readonly string[]).includes(profiled)) {
    throw new Error(`BENCH_PROFILE_ROLE=${profiled}: the drain runs ${DRAIN_ROLES.join(', ')}`);
  }
  const profile = opts.profile ? freshProfileDir(shape.name) : undefined;
  const requests = Math.ceil(DRAIN_EVENTS / EVENTS_PER_REQUEST);
  const events = requests * EVENTS_PER_REQUEST;
  const unique = uniqueEvents(requests);
  const seed = 7;
  log(`${shape.name}: ${events} purchases of ${shape.people} people preloaded (${events - unique} repeated keys), dedupe (core ${SERVER_CPU}) + enrich (core ${LOAD_CPU}) vs Kafka Streams`);
  buildKstreams(log);
  const brokers = runtimeEnv.KAFKA_BROKERS!;
  const run = randomBytes(3).toString('hex');
  const fresh = await freshDatabase(runtimeEnv.DATABASE_URL!);
  const groupPrefix = uniqueId('bench-drain-');
  const env: Record<string, string> = {
    ...runtimeEnv,
    DATABASE_URL: fresh.url,
    KAFKA_GROUP_PREFIX: groupPrefix,
    PLAN_LIMITS: BENCH_PLAN_LIMITS,
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
  };
  const javaEnv = { BOOTSTRAP: brokers };
  const ksPrefix = `bench-kstreams-${run}`;
  const stateDir = mkdtempSync(join(tmpdir(), 'bench-kstreams-'));
  const pidFiles = infraPidFiles();
  const brokerPid = pidFromFile(pidFiles.broker);
  const pgCpu = postgresCpuReader(pidFromFile(pidFiles.postgres));
  const infraReaders: Record<string, () => number> = {
    postgres: pgCpu,
    ...(brokerPid ? { broker: () => processCpuSec(brokerPid) } : {}),
  };
  const running: Child[] = [];
  try {
    // 1. groups, workspace, setup
    await startGroupsAtEnd(brokers.split(','), groupPrefix);
    const connection = new KafkaConnection({ brokers: brokers.split(','), groupPrefix }, silentLogger);
    const kadmin = new KafkaAdmin(connection);
    const rawStart = await topicEnds(kadmin, Topics.eventsRaw).finally(() => kadmin.close());
    const consoleSvc = await startServiceChild({ env: { ...env, SERVICE_ROLE: 'console' } });
    running.push(consoleSvc);
    const call = admin(consoleSvc.url);
    const ws = await call('POST', '/admin/v1/workspaces', { name: 'bench-drain', plan: 'enterprise' });
    const key = await call('POST', `/admin/v1/workspaces/${ws.id}/api-keys`, { mode: 'live' });
    await call('PUT', `/admin/v1/workspaces/${ws.id}/forwarding`, {
      event_source: 'WEB',
      event_source_id: EVENT_SOURCE_ID,
      pii_mode: 'hashed',
      click_window_days: 7,
      events: [{ name: 'purchase', platform_event: 'CompletePayment' }],
    });

    // 2. preload through the gateway
    // The preload is not measured: gateway and load generator float over both cores to be done sooner.
    const gateway = await startServiceChild({ env: { ...env, SERVICE_ROLE: 'gateway' } });
    running.push(gateway);
    const loadStarted = Date.now();
    const load = await runLoad({
      mode: 'closed',
      url: gateway.url,
      path: '/v1/events',
      headers: { authorization: `Bearer ${key.key}` },
      connections: 8,
      amount: requests,
      bodies: { count: requests, events: EVENTS_PER_REQUEST, seed, conversionsOnly: true, keyPrefix: `${run}d`, people: shape.people, repeatShare: REPEAT_SHARE },
    }, undefined);
    if (load.ok !== requests) throw new Error(`preload: ${load.ok}/${requests} requests accepted (${JSON.stringify(load.statuses)})`);
    const preloadSec = (Date.now() - loadStarted) / 1000;
    await gateway.stop();
    await consoleSvc.stop();
    running.length = 0;
    log(`  preload: ${events} events through the gateway in ${round(preloadSec, 1)} s (load generator included) at ${Math.round(load.okPerSec * EVENTS_PER_REQUEST)} events/s`);

    // 3. the baseline's input and identity table
    const from = [...rawStart].map(([p, o]) => `${p}:${o}`).join(',');
    const copy = await tool(['copy', Topics.eventsRaw, `${ksPrefix}-input`, from], javaEnv);
    if (copy.copied !== events) throw new Error(`copy: ${copy.copied} records, expected ${events} (another producer on events.raw?)`);
    const tableFile = join(stateDir, 'identities.tsv');
    writeFileSync(tableFile, identityTable(seed, shape.people));
    const table = await tool(['table', `${ksPrefix}-identities`, tableFile], javaEnv);
    const envelopeBytes = Math.round(copy.valueBytes / copy.copied);
    log(`  copied to ${ksPrefix}-input (${envelopeBytes} bytes per envelope); identity table ${table.records} identifiers`);

    // 4. Kafka Streams
    const ksWatch = await startWatch(`${ksPrefix}-output`, unique, copy.partitions, `${ws.id}:`, javaEnv);
    let jvm: Child | undefined;
    const theirs = await drainSide('kstreams', unique, ksWatch, { kstreams: () => (jvm?.child.pid ? processCpuSec(jvm.child.pid) : 0), ...infraReaders }, ['kstreams', 'postgres'], async () => {
      jvm = java(['streams'], {
        ...javaEnv,
        APP_ID: ksPrefix,
        STATE_DIR: stateDir,
        INPUT_TOPIC: `${ksPrefix}-input`,
        IDENTITY_TOPIC: `${ksPrefix}-identities`,
        OUTPUT_TOPIC: `${ksPrefix}-output`,
        SCHEMA_REGISTRY_URL: runtimeEnv.SCHEMA_REGISTRY_URL!,
        SCHEMAS_DIR: join(REPO_ROOT, 'schemas'),
        EVENT_SOURCE_ID,
      }, '-Xmx1g');
      running.push(jvm);
      await untilRunning(jvm);
      return [jvm];
    }, log);
    await jvm?.stop(20_000);
    running.length = 0;
    const joinLine = jvm?.output().split('\n').find((l) => l.startsWith('{"joined"'));
    const joins = joinLine ? (JSON.parse(joinLine) as { joined: number; unjoined: number }) : undefined;
    log(`  kstreams tenths: ${theirs.tenths.map((w) => `${w.recordsPerSec}/s ${w.cpuUsPerRecord.total} µs`).join(' | ')}`);
    log(`  kstreams: ${theirs.outputs}/${unique} in ${theirs.spanSec} s after ${theirs.startupSec} s of start-up = ${theirs.recordsPerSec} records/s, ${theirs.overall.cpuUsPerRecord.total} µs CPU/record (JVM ${theirs.overall.cpuUsPerRecord.kstreams}; broker ${theirs.overall.cpuUsPerRecord.broker ?? '?'})`);
    if (!theirs.complete) log(`  kstreams output:\n${jvm?.output().slice(-3000)}`);

    // 5. ours: one process per role, one core each
    const ourWatch = await startWatch(Topics.conversionsReady, unique, copy.partitions, `${ws.id}:`, javaEnv);
    const stages: Record<string, ServiceChild> = {};
    const ours = await drainSide(
      'service',
      unique,
      ourWatch,
      {
        dedupe: () => (stages.dedupe?.child.pid ? processCpuSec(stages.dedupe.child.pid) : 0),
        enrich: () => (stages.enrich?.child.pid ? processCpuSec(stages.enrich.child.pid) : 0),
        sink: () => (stages.sink?.child.pid ? processCpuSec(stages.sink.child.pid) : 0),
        ...infraReaders,
      },
      ['dedupe', 'enrich', 'sink', 'postgres'],
      async () => {
        const role = (name: (typeof DRAIN_ROLES)[number]) => ({
          env: { ...env, SERVICE_ROLE: name, GRAPH_SINK_ROLE: 'identity-sink' },
          nodeArgs: profile && name === profiled ? [...STAGE_NODE_ARGS, ...profile.nodeArgs] : STAGE_NODE_ARGS,
        });
        const [d, e, g] = await Promise.all([
          startServiceChild({ ...role('dedupe'), cpu: SERVER_CPU }),
          startServiceChild({ ...role('enrich'), cpu: LOAD_CPU }),
          startServiceChild({ ...role('identity-sink'), cpu: SERVER_CPU }),
        ]);
        stages.dedupe = d;
        stages.enrich = e;
        stages.sink = g;
        running.push(d, e, g);
        return [d, e, g];
      },
      log,
    );
    if (!ours.complete) log(`  service output:\n${stages.enrich?.output().slice(-2000)}\n${stages.dedupe?.output().slice(-2000)}`);
    await Promise.all(running.map((c) => c.stop()));
    running.length = 0;
    if (profile) writeProfilePage(shape.name, profile.dir, `${shape.name}: the service's ${profiled} process during the drain (${shape.people} people)`, log);
    const o = ours.overall.cpuUsPerRecord;
    log(`  service: ${ours.outputs}/${unique} in ${ours.spanSec} s after ${ours.startupSec} s of start-up = ${ours.recordsPerSec} records/s, ${o.total} µs CPU/record (dedupe ${o.dedupe}, enrich ${o.enrich}, sink ${o.sink}, Postgres ${o.postgres}; broker ${o.broker ?? '?'})`);
    log(`  service tenths: ${ours.tenths.map((w) => `${w.recordsPerSec}/s ${w.cpuUsPerRecord.total} µs`).join(' | ')}`);

    const ratio = ours.recordsPerSec / theirs.recordsPerSec;
    const cpuRatio = o.total / theirs.overall.cpuUsPerRecord.total;
    const firstTenth = ours.tenths[0]?.cpuUsPerRecord.total;
    const lastTenth = ours.tenths.length === 10 ? ours.tenths[9]!.cpuUsPerRecord.total : undefined;
    const tenthRatio = firstTenth && lastTenth !== undefined ? lastTenth / firstTenth : undefined;
    const exact = ours.complete && theirs.complete && ours.distinct === ours.outputs && theirs.distinct === theirs.outputs;
    const met = exact && ratio >= 1 && cpuRatio <= 2 && (!shape.tenthTarget || (tenthRatio !== undefined && tenthRatio <= 1.2));
    const dup = (s: Side) => (s.distinct === s.outputs ? 'no duplicates' : `${s.outputs - s.distinct} DUPLICATES`);
    return {
      name: shape.name,
      unit: 'records/s',
      value: ours.recordsPerSec,
      baseline: theirs.recordsPerSec,
      ratio: round(ratio, 3),
      p50_ms: null,
      p99_ms: null,
      target: `≥ 1.0× the Kafka Streams baseline's records/s, CPU/record ≤ 2× its${shape.tenthTarget ? ", last tenth's CPU/record ≤ 1.2× the first's" : ''}`,
      met,
      notes:
        `${events} purchases (${envelopeBytes} B Avro envelopes, ${shape.people} people, ${events - unique} repeated idempotency keys → ${unique} conversions) preloaded into events.raw through a SERVICE_ROLE=gateway process; ` +
        `ours: SERVICE_ROLE=dedupe and SERVICE_ROLE=identity-sink on core ${SERVER_CPU} + SERVICE_ROLE=enrich on core ${LOAD_CPU} (exactly-once, as configured by default), ${ours.outputs}/${unique} conversions committed in ${ours.spanSec} s (${dup(ours)}); ` +
        `baseline: Kafka Streams (bench/baselines/kstreams, exactly_once_v2, 1 stream thread, RocksDB dedupe store + changelog, GlobalKTable of ${table.records} identifiers${joins ? `, ${joins.joined} of ${joins.joined + joins.unjoined} conversions joined to their person` : ''}; JVM unpinned) on a byte copy of the same records, ${theirs.outputs}/${unique} in ${theirs.spanSec} s (${dup(theirs)}). ` +
        `records/s = conversions / (last committed output, read_committed − the processes' ready signal: /readyz, RUNNING); start-up beside it (ours ${ours.startupSec} s, theirs ${theirs.startupSec} s; from the spawn: ${ours.recordsPerSecFromSpawn} vs ${theirs.recordsPerSecFromSpawn} records/s). CPU µs/record (processes + Postgres; broker beside it): ours ${o.total} (dedupe ${o.dedupe}, enrich ${o.enrich}, graph sink ${o.sink}, Postgres ${o.postgres}, broker ${o.broker ?? '–'}), ` +
        `baseline ${theirs.overall.cpuUsPerRecord.total} (JVM ${theirs.overall.cpuUsPerRecord.kstreams}, broker ${theirs.overall.cpuUsPerRecord.broker ?? '–'}): ${round(cpuRatio, 2)}×. ` +
        `Ours by tenth, CPU µs/record: ${ours.tenths.map((w) => w.cpuUsPerRecord.total).join(' / ')}${tenthRatio !== undefined ? ` (last/first ${round(tenthRatio, 2)})` : ''}; records/s: ${ours.tenths.map((w) => w.recordsPerSec).join(' / ')}.` +
        (ours.complete ? '' : ` Ours was cut off after ${MAX_DRAIN_SEC} s (BENCH_DRAIN_MAX_SEC): the rate is over what was committed by then.`),
      detail: {
        events,
        unique,
        people: shape.people,
        repeatShare: REPEAT_SHARE,
        envelopeBytes,
        preload: { sec: round(preloadSec, 1), gatewayEventsPerSec: Math.round(load.okPerSec * EVENTS_PER_REQUEST) },
        layout: { dedupe: `core ${SERVER_CPU}`, enrich: `core ${LOAD_CPU}`, 'identity-sink': `core ${SERVER_CPU}`, kstreams: 'unpinned (1 stream thread)', infra: 'unpinned' },
        cpuRatio: round(cpuRatio, 3),
        lastToFirstTenthCpu: tenthRatio === undefined ? null : round(tenthRatio, 3),
        // The first tenth also carries the processes' warm-up (JIT, caches); the second is the steadier reference.
        lastToSecondTenthCpu: lastTenth !== undefined && ours.tenths[1] ? round(lastTenth / ours.tenths[1].cpuUsPerRecord.total, 3) : null,
        ours,
        kstreams: { ...theirs, join: joins ?? null },
      },
    };
  } finally {
    await Promise.all(running.map((c) => c.stop(5000)));
    await tool(['delete', ksPrefix], javaEnv).catch((err: Error) => log(`  (could not delete ${ksPrefix}* topics: ${err.message.split('\n')[0]})`));
    rmSync(stateDir, { recursive: true, force: true });
    await fresh.drop();
  }
}
