/**
 * The load generator, run as its own process (pinned to its own core when taskset exists): `node load-worker.js
 * <spec.json>`. Writes a LoadResult as JSON to spec.out.
 *
 *  - `closed`: autocannon, closed loop: `connections` connections each send the next request as soon as the previous
 *    answer arrived. Finds the maximum rate.
 *  - `open`: a fixed-rate open loop: request i is due at t0 + i/rate, whether or not earlier ones were answered, on a
 *    pool of keep-alive connections; latency is measured from the due time (no coordinated omission). autocannon's
 *    own `overallRate` is not an open loop: each connection sends its per-second quota back to back and then waits
 *    for the next second, so "half load" would be full-speed bursts.
 *
 * Bodies are generated here (bench/lib/events.ts), before the clock starts.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import autocannon from 'autocannon';
import { makeBodies, repeatedKey, type BodyOptions } from './events.js';

export interface LoadSpec {
  readonly mode: 'closed' | 'open';
  readonly url: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly bodies: {
    readonly count: number;
    readonly events: number;
    readonly seed: number;
    readonly conversionsOnly?: boolean;
    readonly keyPrefix?: string;
    /** Size of the pool of people (events.ts DEFAULT_PEOPLE when absent). */
    readonly people?: number;
    /** Share of events that reuse an earlier event's key (events.ts repeatedKey); needs keyPrefix. */
    readonly repeatShare?: number;
  };
  /** closed: connections; open: size of the connection pool (the most requests in flight). */
  readonly connections: number;
  readonly durationSec?: number;
  /** closed: stop after this many requests (each body once when equal to bodies.count). */
  readonly amount?: number;
  /** open: requests per second. */
  readonly rate?: number;
  /** Keep [body index, epoch ms of the answer, status] per request (pipeline latency correlation). */
  readonly recordCompletions?: boolean;
  readonly out: string;
}

export interface LoadResult {
  readonly mode: 'closed' | 'open';
  readonly requests: number;
  readonly ok: number;
  readonly non2xx: number;
  readonly errors: number;
  readonly durationSec: number;
  /** Answered 2xx per second. */
  readonly okPerSec: number;
  readonly latencyMs: { readonly p50: number; readonly p90: number; readonly p99: number; readonly max: number; readonly mean: number };
  /** closed loop: the latency of every answer, 2xx or not (what a client waits for, shed or served). */
  readonly answerLatencyMs?: LoadResult['latencyMs'];
  readonly statuses: Record<string, number>;
  readonly startedAt: number;
  /** open loop: how late the generator sent requests after their due time (ms); large values mean it fell behind. */
  readonly sendLagMs?: { readonly p50: number; readonly p99: number; readonly max: number };
  readonly completions?: Array<[number, number, number]>;
  /** closed loop: per second of the run (by answer time), the answers' count, shed (503) count, p99 and max (ms). */
  /** closed loop: the generator's CPU time over the run's wall time (1 = its core was always busy: then its own
   * delays are in the latencies, and the figures describe the generator as much as the service). */
  readonly generatorCpu?: number;
  readonly answerTimeline?: Array<{
    readonly second: number;
    readonly answers: number;
    readonly shed: number;
    readonly p99: number;
    readonly max: number;
    /** 2xx answers in the second, and the slowest of them (ms). */
    readonly accepted: number;
    readonly acceptedMax: number;
  }>;
}

export function percentile(sorted: Float64Array | number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

function summarise(latencies: number[]): LoadResult['latencyMs'] {
  const a = Float64Array.from(latencies).sort();
  const mean = a.reduce((s, v) => s + v, 0) / (a.length || 1);
  const r = (v: number) => Math.round(v * 100) / 100;
  return { p50: r(percentile(a, 50)), p90: r(percentile(a, 90)), p99: r(percentile(a, 99)), max: r(a[a.length - 1] ?? NaN), mean: r(mean) };
}

function bodiesFor(spec: LoadSpec): string[] {
  const b = spec.bodies;
  const share = b.repeatShare ?? 0;
  // A repeated event takes the key of the same index one request earlier (itself possibly a repeat, so: the latest
  // request at or before it that was not one).
  const key = (q: number, i: number): string => {
    let from = q;
    while (repeatedKey(from, i, share)) from--;
    return `${b.keyPrefix}-${from}-${i}`;
  };
  const opts: BodyOptions = {
    events: b.events,
    conversionsOnly: b.conversionsOnly,
    people: b.people,
    key: b.keyPrefix === undefined ? undefined : key,
  };
  return makeBodies(b.count, opts, b.seed);
}

async function closed(spec: LoadSpec, bodies: string[]): Promise<LoadResult> {
  // Encoded once: encoding each body per request saturates the generator, whose delay would count as the service's.
  const payloads = bodies.map((b) => Buffer.from(b));
  let next = 0;
  const latencies: number[] = [];
  const answerLatencies: number[] = [];
  const statuses: Record<string, number> = {};
  const completions: Array<[number, number, number]> = [];
  const startedAt = Date.now();
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  const instance = autocannon({
    url: spec.url,
    connections: spec.connections,
    ...(spec.amount === undefined ? { duration: spec.durationSec ?? 10 } : { amount: spec.amount }),
    timeout: 30,
    requests: [
      {
        method: 'POST',
        path: spec.path,
        headers: { 'content-type': 'application/json', ...spec.headers },
        setupRequest: (req: any, context: any) => {
          const i = next++;
          context.i = i;
          return { ...req, body: payloads[i % payloads.length] };
        },
        onResponse: spec.recordCompletions
          ? (status: number, _body: string, context: any) => void completions.push([context.i, Date.now(), status])
          : undefined,
      },
    ],
  } as any);
  const bySecond: Array<{ latencies: number[]; shed: number; accepted: number[] }> = [];
  instance.on('response', (_client: unknown, status: number, _bytes: number, responseTime: number) => {
    statuses[status] = (statuses[status] ?? 0) + 1;
    answerLatencies.push(responseTime);
    const second = (bySecond[Math.floor((Date.now() - startedAt) / 1000)] ??= { latencies: [], shed: 0, accepted: [] });
    second.latencies.push(responseTime);
    if (status === 503) second.shed++;
    if (status >= 200 && status < 300) second.accepted.push(responseTime);
    if (status >= 200 && status < 300) latencies.push(responseTime);
  });
  const result: any = await instance;
  const cpu = process.cpuUsage(cpu0);
  const generatorCpu = (cpu.user + cpu.system) / 1000 / (performance.now() - wall0);
  const ok = result['2xx'] as number;
  const durationSec = result.duration as number;
  return {
    mode: 'closed',
    requests: ok + (result.non2xx as number),
    ok,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    durationSec,
    okPerSec: ok / durationSec,
    latencyMs: summarise(latencies),
    answerLatencyMs: summarise(answerLatencies),
    answerTimeline: [...bySecond.entries()].map(([second, s]) => {
      const l = summarise(s?.latencies ?? []);
      const a = summarise(s?.accepted ?? []);
      return { second, answers: s?.latencies.length ?? 0, shed: s?.shed ?? 0, p99: l.p99, max: l.max, accepted: s?.accepted.length ?? 0, acceptedMax: a.max };
    }),
    statuses,
    startedAt,
    generatorCpu: Math.round(generatorCpu * 100) / 100,
    completions: spec.recordCompletions ? completions : undefined,
  };
}

async function open(spec: LoadSpec, bodies: string[]): Promise<LoadResult> {
  const rate = spec.rate!;
  const total = spec.amount ?? Math.round(rate * (spec.durationSec ?? 10));
  const target = new URL(spec.url);
  const agent = new Agent({ keepAlive: true, maxSockets: spec.connections });
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  const completions: Array<[number, number, number]> = [];
  let errors = 0;
  let done = 0;
  const t0 = performance.now() + 20;
  const startedAt = Date.now() + 20;
  const epochOffset = Date.now() - performance.now();

  // Bodies and headers encoded once: the generator must not fall behind its schedule.
  const payloads = bodies.map((b) => Buffer.from(b));
  const headersFor = payloads.map((b) => ({ 'content-type': 'application/json', 'content-length': String(b.length), ...spec.headers }));
  const lags: number[] = [];
  const send = (i: number, due: number): void => {
    const body = payloads[i % payloads.length]!;
    lags.push(performance.now() - due);
    const req = httpRequest(
      {
        agent,
        host: target.hostname,
        port: target.port,
        path: spec.path,
        method: 'POST',
        headers: headersFor[i % payloads.length],
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          const now = performance.now();
          const status = res.statusCode ?? 0;
          statuses[status] = (statuses[status] ?? 0) + 1;
          if (status >= 200 && status < 300) latencies.push(now - due);
          if (spec.recordCompletions) completions.push([i, Math.round(now + epochOffset), status]);
          done++;
        });
      },
    );
    req.on('error', () => {
      errors++;
      done++;
    });
    req.end(body);
  };

  await new Promise<void>((resolve) => {
    let i = 0;
    const tick = (): void => {
      const now = performance.now();
      while (i < total && t0 + (i * 1000) / rate <= now) {
        send(i, t0 + (i * 1000) / rate);
        i++;
      }
      if (i < total) {
        const wait = t0 + (i * 1000) / rate - performance.now();
        if (wait > 2) setTimeout(tick, wait - 1);
        else setImmediate(tick);
      } else {
        const waitDone = (): void => {
          if (done >= total) resolve();
          else setTimeout(waitDone, 5);
        };
        waitDone();
      }
    };
    setTimeout(tick, 20);
  });
  const durationSec = (performance.now() - t0) / 1000;
  agent.destroy();
  const ok = latencies.length;
  return {
    mode: 'open',
    requests: total,
    ok,
    non2xx: total - ok - errors,
    errors,
    durationSec,
    okPerSec: ok / durationSec,
    latencyMs: summarise(latencies),
    statuses,
    startedAt,
    sendLagMs: (({ p50, p99, max }) => ({ p50, p99, max }))(summarise(lags)),
    completions: spec.recordCompletions ? completions : undefined,
  };
}

async function main(): Promise<void> {
  const spec = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as LoadSpec;
  const bodies = bodiesFor(spec);
  const result = spec.mode === 'closed' ? await closed(spec, bodies) : await open(spec, bodies);
  writeFileSync(spec.out, JSON.stringify(result));
}

if (process.argv[1]?.endsWith('load-worker.js')) {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`load worker failed: ${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}
