/**
 * `make bench`: runs every benchmark, writes bench/results/<name>.json and the table in bench/README.md.
 * `node dist/bench/run.js [name…] [flags]` runs only the named ones (e.g. `gateway-embedded dedupe-memory`). Flags:
 * `--no-profile` (no profiled gateway runs), `--no-whatif` (no gateway-kafka what-if), `--profile-pipeline` (the
 * pipelines and the drains under --cpu-prof, for bench/profiles/; their results are not written).
 * BENCH_PRIVATE_KAFKA=1: the Kafka benchmarks on a broker of their own (bench/lib/infra.ts). Before the Kafka pipelines the broker is warmed up with
 * the pipeline's own work, not measured (bench/pipeline.ts warmUpBroker; BENCH_BROKER_WARM_UP=0 skips it).
 *
 * Kafka benchmarks need KAFKA_BROKERS, SCHEMA_REGISTRY_URL and DATABASE_URL; when they are not set, the local
 * infrastructure is started with `bash infra/local/up.sh` (as `make test` does) and infra/local/.env is read.
 */
import { cpus, totalmem } from 'node:os';
import { parseArgs } from 'node:util';
import { benchDedupeMemory } from './dedupe-memory.js';
import { benchGraphMemory } from './graph-memory.js';
import { benchEnrichGraph } from './enrich-graph.js';
import { EVENTS_PER_REQUEST, benchGateway, measureBaseline, type Measured } from './gateway.js';
import { kafkaEnv, stopPrivateBroker } from './lib/infra.js';
import { hasTaskset, removeServiceDataDirs } from './lib/proc.js';
import { SERVICE_KAFKA_CLIENTS, gitSha, round, updateReadme, writeResult, type BenchResult } from './lib/results.js';
import { benchKafkaClient } from './kafka-client.js';
import { benchOverload } from './overload.js';
import { benchPipeline, warmUpBroker } from './pipeline.js';
import { DRAIN_SHAPES, benchPipelineDrain } from './pipeline-drain.js';
import { benchReplayImpact } from './replay.js';

const log = (line: string): void => void process.stdout.write(`${line}\n`);
const started = Date.now();
const sha = gitSha();
const date = new Date().toISOString();

const ALL = ['gateway-embedded', 'gateway-kafka', 'gateway-overload-embedded', 'gateway-overload-kafka', 'pipeline-embedded', 'pipeline-kafka', 'pipeline-drain-kafka', 'pipeline-drain-kafka-500-people', 'replay-impact-embedded', 'replay-impact-kafka', 'dedupe-memory', 'graph-memory', 'enrich-graph', 'kafka-client'] as const;
type Name = (typeof ALL)[number];
const USAGE = `usage: node dist/bench/run.js [name…] [--no-profile] [--no-whatif] [--profile-pipeline]\nnames: ${ALL.join(' ')}`;

function parseCommandLine(): { wanted: Set<Name>; flags: { profile: boolean; whatif: boolean; profilePipeline: boolean } } {
  const fail = (message: string): never => {
    process.stderr.write(`${message}\n${USAGE}\n`);
    process.exit(2);
  };
  let parsed;
  try {
    parsed = parseArgs({
      options: {
        'no-profile': { type: 'boolean', default: false },
        'no-whatif': { type: 'boolean', default: false },
        'profile-pipeline': { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    return fail((err as Error).message);
  }
  if (parsed.values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const unknown = parsed.positionals.filter((a) => !(ALL as readonly string[]).includes(a));
  if (unknown.length > 0) fail(`unknown benchmark: ${unknown.join(', ')}`);
  return {
    wanted: new Set(parsed.positionals as Name[]),
    flags: { profile: !parsed.values['no-profile'], whatif: !parsed.values['no-whatif'], profilePipeline: parsed.values['profile-pipeline'] },
  };
}

const { wanted, flags } = parseCommandLine();
const selected = (n: Name) => wanted.size === 0 || wanted.has(n);
const profile = flags.profile;

const cores = hasTaskset()
  ? 'server on core 0, load generator (and the sandbox) on core 1 (taskset), the pipeline benchmarks\' services as their layout says; Kafka, registry and Postgres unpinned'
  : 'taskset not found: processes share both cores freely';

function gatewayResult(name: string, service: Measured, baseline: Measured, notes: string, detail: unknown): BenchResult {
  const ratio = service.eventsPerSec / baseline.eventsPerSec;
  const p99 = service.half.latencyMs.p99;
  const kafka = name.endsWith('kafka');
  return {
    name,
    unit: 'events/s',
    value: Math.round(service.eventsPerSec),
    baseline: Math.round(baseline.eventsPerSec),
    ratio: round(ratio, 3),
    p50_ms: service.half.latencyMs.p50,
    p99_ms: p99,
    git_sha: sha,
    date,
    notes,
    target: kafka ? 'ratio ≥ 0.5, p99 < 50 ms at half load' : '– (Kafka target applies; reported for comparison)',
    met: kafka ? ratio >= 0.5 && p99 < 50 : null,
    ...(kafka ? { kafka_client: SERVICE_KAFKA_CLIENTS } : {}),
    detail,
  };
}

const failed: string[] = [];

/** Runs one benchmark; a failure is reported and the others still run (the exit code says so at the end). */
async function attempt(name: string, fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    failed.push(name);
    log(`${name}: FAILED: ${(err as Error).stack ?? String(err)}`);
  } finally {
    removeServiceDataDirs();
  }
}

async function main(): Promise<void> {
  log(`bench: ${cpus().length} cores (${cpus()[0]?.model ?? '?'}), ${Math.round(totalmem() / 2 ** 30)} GiB, node ${process.version}, git ${sha}`);
  log(`cores: ${cores}`);
  const needKafka = selected('gateway-kafka') || selected('gateway-overload-kafka') || selected('pipeline-kafka') || DRAIN_SHAPES.some((s) => selected(s.name as Name)) || selected('replay-impact-kafka') || selected('kafka-client');
  const kenv = needKafka ? await kafkaEnv(log) : undefined;
  // The stages' benchmarks measure on a broker whose JIT has compiled their code, as a broker in service has.
  const needWarmBroker = selected('pipeline-kafka') || DRAIN_SHAPES.some((s) => selected(s.name as Name)) || selected('replay-impact-kafka');
  if (kenv?.ready && needWarmBroker && process.env.BENCH_BROKER_WARM_UP !== '0') await attempt('broker warm-up', () => warmUpBroker(kenv.env, log));

  /** Runs a benchmark on each runtime whose `<family>-<runtime>` is selected; on Kafka only when a broker is there. */
  const perRuntime = async (family: string, bench: (runtime: 'embedded' | 'kafka', env: Record<string, string>, name: Name) => Promise<void>): Promise<void> => {
    for (const runtime of ['embedded', 'kafka'] as const) {
      const name = `${family}-${runtime}` as Name;
      if (!selected(name)) continue;
      if (runtime === 'kafka' && !kenv?.ready) {
        log(`${name}: skipped (${kenv?.reason ?? 'no Kafka'})`);
        continue;
      }
      await attempt(name, () => bench(runtime, runtime === 'kafka' ? kenv!.env : {}, name));
    }
  };

  await perRuntime('gateway', async (runtime, env, name) => {
    const baseline = await measureBaseline(log);
    const run = await benchGateway(runtime, env, log, { profile, whatif: flags.whatif });
    const s = run.service;
    const notes =
      `${EVENTS_PER_REQUEST}-event batches of realistic A events (70% web, 30% server, hashed identifiers), ${s.max.requests} requests in the max phase. ` +
      `Max: closed loop (autocannon), ${s.max.durationSec.toFixed(1)} s: service ${round(s.max.okPerSec)} req/s vs baseline ${round(baseline.max.okPerSec)} req/s. ` +
      `Half load: open loop at ${round(s.max.okPerSec / 2)} req/s, median of 3 windows (p99 of each: ${s.halfRuns.map((h) => h.latencyMs.p99).join(' / ')} ms) (baseline at ${round(baseline.max.okPerSec / 2)} req/s: p50 ${baseline.half.latencyMs.p50} ms, p99 ${baseline.half.latencyMs.p99} ms). ` +
      `Server CPU: ${s.cpuUsPerEvent} µs/event (baseline ${baseline.cpuUsPerEvent}). Cores: ${cores}. SERVICE_ROLE=gateway.` +
      (runtime === 'kafka' ? ' What limits it: bench/README.md and bench/profiles/gateway-kafka.md.' : '') +
      (run.whatif
        ? ` What-if (bench/lib/gateway-whatif.ts: the same gateway with one-pass Avro encoding and @platformatic/kafka; not the service): ${Math.round(run.whatif.eventsPerSec)} events/s, ratio ${round(run.whatif.eventsPerSec / baseline.eventsPerSec, 3)}, ${run.whatif.cpuUsPerEvent} µs/event, p50 ${run.whatif.half.latencyMs.p50} ms, p99 ${run.whatif.half.latencyMs.p99} ms at half load.`
        : '');
    const file = writeResult(
      gatewayResult(name, s, baseline, notes, { service: strip(s), baseline: strip(baseline), ...(run.whatif ? { whatif: strip(run.whatif) } : {}) }),
    );
    log(`  → ${file}`);
  });

  await perRuntime('gateway-overload', async (runtime, env) => {
    const r = await benchOverload(runtime, env, log);
    log(`  → ${writeResult({ ...r, git_sha: sha, date, notes: `${r.notes} Cores: ${cores}.` })}`);
  });

  await perRuntime('pipeline', async (runtime, env) => {
    // --profile-pipeline: a run under --cpu-prof for bench/profiles/pipeline-*.md; its numbers are not the results.
    const profiled = flags.profilePipeline;
    const r = await benchPipeline(runtime, env, log, { profile: profiled });
    if (profiled) log('  (profiled run: results not written)');
    else
      log(
        `  → ${writeResult({ ...r, git_sha: sha, date, notes: `${r.notes} Cores: ${cores}.`, ...(runtime === 'kafka' ? { kafka_client: SERVICE_KAFKA_CLIENTS } : {}) })}`,
      );
  });

  for (const shape of DRAIN_SHAPES) {
    const name = shape.name as Name;
    if (!selected(name)) continue;
    if (!kenv?.ready) {
      log(`${name}: skipped (${kenv?.reason ?? 'no Kafka'})`);
      continue;
    }
    await attempt(name, async () => {
      // --profile-pipeline: the drain under --cpu-prof for bench/profiles/<name>.md; its numbers are not the results.
      const r = await benchPipelineDrain(shape, kenv.env, log, { profile: flags.profilePipeline });
      if (flags.profilePipeline) log('  (profiled run: results not written)');
      else log(`  → ${writeResult({ ...r, git_sha: sha, date, kafka_client: SERVICE_KAFKA_CLIENTS })}`);
    });
  }

  await perRuntime('replay-impact', async (runtime, env) => {
    const r = await benchReplayImpact(runtime, env, log);
    log(`  → ${writeResult({ ...r, git_sha: sha, date, notes: `${r.notes} Cores: ${cores}.` })}`);
  });

  if (selected('dedupe-memory')) {
    await attempt('dedupe-memory', async () => {
      for (const r of await benchDedupeMemory(log)) log(`  → ${writeResult({ ...r, git_sha: sha, date })}`);
    });
  }

  if (selected('graph-memory')) {
    await attempt('graph-memory', async () => {
      const r = await benchGraphMemory(log);
      log(`  → ${writeResult({ ...r, git_sha: sha, date })}`);
    });
  }

  if (selected('enrich-graph')) {
    const databaseUrl = kenv?.env.DATABASE_URL ?? process.env.DATABASE_URL;
    if (!databaseUrl) log('enrich-graph: skipped (no Postgres: DATABASE_URL)');
    else {
      await attempt('enrich-graph', async () => {
        const r = await benchEnrichGraph(databaseUrl, log);
        log(`  → ${writeResult({ ...r, git_sha: sha, date })}`);
      });
    }
  }

  if (selected('kafka-client')) {
    if (!kenv?.ready) log(`kafka-client: skipped (${kenv?.reason ?? 'no Kafka'})`);
    else {
      await attempt('kafka-client', async () => {
        const r = await benchKafkaClient(kenv.env, log);
        log(`  → ${writeResult({ ...r, git_sha: sha, date })}`);
      });
    }
  }

  updateReadme(
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ${Math.round(totalmem() / 2 ** 30)} GiB, node ${process.version}. ` +
      `Cores: ${cores}. ${process.env.BENCH_PRIVATE_KAFKA === '1' ? 'Kafka benchmarks on a private broker (BENCH_PRIVATE_KAFKA=1). ' : ''}` +
      `Last run took ${Math.round((Date.now() - started) / 1000)} s.`,
  );
  log(`bench: done in ${Math.round((Date.now() - started) / 1000)} s; table in bench/README.md`);
  if (failed.length > 0) throw new Error(`failed: ${failed.join(', ')}`);
}

/** The per-request completion lists are large; the result files keep the summaries. */
function strip(m: Measured) {
  const s = (r: Measured['max']) => ({ ...r, completions: undefined });
  return { eventsPerSec: Math.round(m.eventsPerSec), cpuUsPerEvent: m.cpuUsPerEvent, max: s(m.max), half: s(m.half), halfRuns: m.halfRuns };
}

main()
  .finally(() => stopPrivateBroker())
  .then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
