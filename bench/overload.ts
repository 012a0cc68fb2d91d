/**
 * gateway-overload: overload is shed inside the deadline, not queued past it. The service as `make run` starts it (embedded default, SERVICE_ROLE=all, so the
 * stages share its core), pinned to core 0, takes 100-event batches from OVERLOAD_CONNECTIONS clients in a closed
 * loop (autocannon, on core 1). Every answer counts, shed or served: the value is the p99 of the time each client
 * waited for its answer, which the deadline (docs/operations.md, "The deadline": 1.5 s from the first byte) bounds.
 * The baseline is the same service in the same run under the gateway benchmark's 16 clients.
 */
import { rmSync } from 'node:fs';
import { CONNECTIONS, EVENTS_PER_REQUEST, gatewayBenchEnv, setupWorkspace } from './gateway.js';
import type { LoadResult } from './lib/load-worker.js';
import { SERVER_CPU, runLoad, startServiceChild } from './lib/proc.js';
import { round, type BenchResult } from './lib/results.js';

export const OVERLOAD_CONNECTIONS = Number(process.env.BENCH_OVERLOAD_CONNECTIONS ?? 1_000);
const DURATION_SEC = Number(process.env.BENCH_OVERLOAD_SEC ?? 10);
/** The spec's deadline for an answer on the ingestion endpoints. */
const DEADLINE_MS = 1_500;
/** Answers the overload contract allows: accepted, or shed / not made durable in time (503 with Retry-After). */
const ALLOWED = new Set(['202', '503']);

const OVERLOAD_EVENTS = Number(process.env.BENCH_OVERLOAD_EVENTS ?? EVENTS_PER_REQUEST);
const bodies = (seed: number) => ({ count: 64, events: OVERLOAD_EVENTS, seed });

export async function benchOverload(
  runtime: 'embedded' | 'kafka',
  runtimeEnv: Record<string, string>,
  log: (l: string) => void,
): Promise<Omit<BenchResult, 'git_sha' | 'date'>> {
  // Embedded: the default deployment, every role in one process. Kafka: a gateway replica (the stages run elsewhere).
  const role = runtime === 'kafka' ? 'gateway' : 'all';
  const { env: base, fresh } = await gatewayBenchEnv(runtime, runtimeEnv, 'bench-ovl-');
  const env = { ...base, SERVICE_ROLE: role };
  const { dataDir, key } = await setupWorkspace(env);
  const headers = { authorization: `Bearer ${key}` };
  const service = await startServiceChild({ env, dataDir, cpu: SERVER_CPU });
  let normal: LoadResult;
  let overload: LoadResult;
  try {
    log(`gateway-overload-${runtime} (SERVICE_ROLE=${role}, ${OVERLOAD_EVENTS}-event batches): ${CONNECTIONS} clients, then ${OVERLOAD_CONNECTIONS}`);
    await runLoad({ mode: 'closed', url: service.url, path: '/v1/events', headers, bodies: bodies(7), connections: CONNECTIONS, durationSec: 4 });
    normal = await runLoad({ mode: 'closed', url: service.url, path: '/v1/events', headers, bodies: bodies(42), connections: CONNECTIONS, durationSec: DURATION_SEC });
    log(`  ${CONNECTIONS} clients: ${describe(normal)}`);
    overload = await runLoad({
      mode: 'closed',
      url: service.url,
      path: '/v1/events',
      headers,
      bodies: bodies(43),
      connections: OVERLOAD_CONNECTIONS,
      durationSec: DURATION_SEC,
    });
    log(`  ${OVERLOAD_CONNECTIONS} clients: ${describe(overload)}`);
    const ready = await fetch(`${service.url}/readyz`);
    if (ready.status !== 200) throw new Error(`not ready after the overload: ${ready.status}`);
  } finally {
    await service.stop();
    rmSync(dataDir, { recursive: true, force: true });
    await fresh?.drop();
  }
  const p99 = overload.answerLatencyMs!.p99;
  const others = Object.keys(overload.statuses).filter((s) => !ALLOWED.has(s));
  const shed = (overload.statuses['503'] ?? 0) / Math.max(1, overload.requests);
  const goodput = overload.okPerSec / normal.okPerSec;
  return {
    name: `gateway-overload-${runtime}`,
    unit: `ms (p99 of every answer, ${OVERLOAD_CONNECTIONS} clients)`,
    value: p99,
    baseline: normal.answerLatencyMs!.p99,
    ratio: round(p99 / normal.answerLatencyMs!.p99, 2),
    p50_ms: overload.answerLatencyMs!.p50,
    p99_ms: p99,
    notes:
      `${runtime === 'kafka' ? 'Kafka runtime, a gateway replica (SERVICE_ROLE=gateway)' : 'Embedded default (SERVICE_ROLE=all)'} on core 0; closed loop of ${OVERLOAD_EVENTS}-event batches for ${DURATION_SEC} s. ` +
      `${OVERLOAD_CONNECTIONS} clients: p50 ${overload.answerLatencyMs!.p50} ms, p99 ${p99} ms, max ${overload.answerLatencyMs!.max} ms over every answer; ` +
      `${Math.round(shed * 100)}% shed with 503; accepted ${Math.round(overload.okPerSec * OVERLOAD_EVENTS)} events/s, ${round(goodput, 2)}× the accepted rate at ${CONNECTIONS} clients ` +
      `(${Math.round(normal.okPerSec * OVERLOAD_EVENTS)} events/s, p99 ${normal.answerLatencyMs!.p99} ms: the baseline). Statuses ${JSON.stringify(overload.statuses)}, connection errors ${overload.errors}. ` +
      `The load generator's core was ${Math.round((overload.generatorCpu ?? 0) * 100)}% busy (near 100%, its own delays would be in the latencies). ` +
      `Before issue 14 the same load queued every request (p99 5–7 s).`,
    target: `p99 of every answer < ${DEADLINE_MS} ms (the deadline) with ${OVERLOAD_CONNECTIONS} clients, only 202 or 503, no connection errors`,
    met: p99 < DEADLINE_MS && others.length === 0 && overload.errors === 0,
    detail: { normal: { ...normal, completions: undefined }, overload: { ...overload, completions: undefined }, shedShare: round(shed, 3), goodputRatio: round(goodput, 3) },
  };
}

function describe(r: LoadResult): string {
  const a = r.answerLatencyMs!;
  return `${round(r.okPerSec)} req/s accepted, every answer p50 ${a.p50} ms / p99 ${a.p99} ms / max ${a.max} ms, statuses ${JSON.stringify(r.statuses)}, errors ${r.errors}`;
}
