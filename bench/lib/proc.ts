/**
 * Child processes of the bench: the service (node dist/services/compose/main.js, as an operator runs it), the platform
 * sandbox, the bare-Fastify baseline and the load generator, each pinned to a core with taskset when it exists.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePorts } from '../../test/sandbox/ports.js';
import type { LoadResult, LoadSpec } from './load-worker.js';

/** dist/bench/lib → the repository root. */
export const REPO_ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..', '..');
export const DIST = join(REPO_ROOT, 'dist');

let tasksetChecked: boolean | undefined;
export function hasTaskset(): boolean {
  tasksetChecked ??= spawnSync('taskset', ['-c', '0', 'true']).status === 0;
  return tasksetChecked;
}

/** The cores: the server on SERVER_CPU, the load generator (and the sandbox) on LOAD_CPU. */
export const SERVER_CPU = 0;
export const LOAD_CPU = 1;

export function pinnedCommand(cpu: number | undefined, args: readonly string[]): { cmd: string; args: string[] } {
  if (cpu !== undefined && hasTaskset()) return { cmd: 'taskset', args: ['-c', String(cpu), ...args] };
  return { cmd: args[0]!, args: args.slice(1) };
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export interface Child {
  readonly child: ChildProcess;
  output(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves the exit code. */
  stop(graceMs?: number): Promise<number | null>;
}

export function spawnChild(cpu: number | undefined, args: readonly string[], env: Record<string, string>, cwd = REPO_ROOT): Child {
  const { cmd, args: a } = pinnedCommand(cpu, args);
  const child = spawn(cmd, a, { env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env }, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (d: Buffer) => {
    out += d.toString();
    if (out.length > 200_000) out = out.slice(-100_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return {
    child,
    output: () => out,
    async stop(graceMs = 25_000) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

async function waitFor(check: () => Promise<boolean>, child: Child, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.child.exitCode !== null) throw new Error(`${what} exited with ${child.child.exitCode} before ready:\n${child.output().slice(-4000)}`);
    try {
      if (await check()) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) {
      await child.stop(1000);
      throw new Error(`${what} not ready within ${timeoutMs} ms:\n${child.output().slice(-4000)}`);
    }
    await sleep(100);
  }
}

export const BENCH_ADMIN_TOKEN = 'bench-admin-token-0123456789';

export interface ServiceChild extends Child {
  readonly url: string;
  /** Its Prometheus endpoint (`/metrics` on METRICS_PORT). */
  readonly metricsUrl: string;
  readonly dataDir: string;
}

export interface ServiceStart {
  readonly env: Record<string, string>;
  readonly cpu?: number;
  readonly dataDir?: string;
  /** Extra node flags (e.g. --cpu-prof). */
  readonly nodeArgs?: readonly string[];
  /** Entry script (default dist/services/compose/main.js). */
  readonly entry?: string;
  readonly readyTimeoutMs?: number;
}

/** Data directories startServiceChild made (an embedded pipeline run's store takes ~1 GB), until removeServiceDataDirs. */
const madeDataDirs = new Set<string>();

/** Removes the data directories startServiceChild made: bench/run.ts, after each benchmark (its services have stopped). */
export function removeServiceDataDirs(): void {
  for (const dir of madeDataDirs) rmSync(dir, { recursive: true, force: true });
  madeDataDirs.clear();
}

export async function startServiceChild(opts: ServiceStart): Promise<ServiceChild> {
  const [port, metricsPort] = (await freePorts(2)) as [number, number];
  let dataDir = opts.dataDir;
  if (dataDir === undefined) madeDataDirs.add((dataDir = mkdtempSync(join(tmpdir(), 'bench-svc-'))));
  const env: Record<string, string> = {
    PORT: String(port),
    HOST: '127.0.0.1',
    METRICS_PORT: String(metricsPort),
    DATA_DIR: dataDir,
    ADMIN_TOKEN: BENCH_ADMIN_TOKEN,
    PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
    LOG_LEVEL: 'warn',
    ...opts.env,
  };
  const child = spawnChild(opts.cpu, [process.execPath, ...(opts.nodeArgs ?? []), opts.entry ?? join(DIST, 'services', 'compose', 'main.js')], env);
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, child, 'service', opts.readyTimeoutMs ?? 90_000);
  return { ...child, url, metricsUrl: `http://127.0.0.1:${env.METRICS_PORT}/metrics`, dataDir };
}

/** Sums of Prometheus samples by metric name and a label (text format), e.g. stage_batch_duration_seconds_sum by stage. */
export async function scrapeSums(metricsUrl: string, label: string): Promise<Map<string, number>> {
  const text = await (await fetch(metricsUrl)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)\{([^}]*)\} ([0-9.e+-]+)$/.exec(line);
    if (!m) continue;
    const value = new RegExp(`${label}="([^"]*)"`).exec(m[2]!)?.[1];
    if (value === undefined) continue;
    const k = `${m[1]}|${value}`;
    out.set(k, (out.get(k) ?? 0) + Number(m[3]));
  }
  return out;
}

/** Values of unlabelled Prometheus samples (text format) by metric name; absent names are absent. */
export async function scrapeTotals(metricsUrl: string, names: readonly string[]): Promise<Map<string, number>> {
  const text = await (await fetch(metricsUrl)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+) ([0-9.e+-]+)$/.exec(line);
    if (m && names.includes(m[1]!)) out.set(m[1]!, Number(m[2]));
  }
  return out;
}

/** Starts a process that prints one JSON line when it listens; resolves that line. */
export async function startJsonLineChild<T>(cpu: number | undefined, args: readonly string[], env: Record<string, string>, what: string): Promise<{ child: Child; info: T }> {
  const child = spawnChild(cpu, args, env);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const line = child.output().split('\n').find((l) => l.startsWith('{'));
    if (line) return { child, info: JSON.parse(line) as T };
    if (child.child.exitCode !== null) throw new Error(`${what} exited with ${child.child.exitCode}:\n${child.output()}`);
    if (Date.now() > deadline) {
      await child.stop(1000);
      throw new Error(`${what} did not start:\n${child.output()}`);
    }
    await sleep(50);
  }
}

/** Runs the load generator in its own process on LOAD_CPU and returns its result. */
export async function runLoad(spec: Omit<LoadSpec, 'out'>, cpu: number | undefined = LOAD_CPU): Promise<LoadResult> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-load-'));
  const specFile = join(dir, 'spec.json');
  const out = join(dir, 'result.json');
  writeFileSync(specFile, JSON.stringify({ ...spec, out }));
  const child = spawnChild(cpu, [process.execPath, '--max-old-space-size=4096', join(DIST, 'bench', 'lib', 'load-worker.js'), specFile], {});
  const code = await new Promise<number | null>((r) => child.child.once('exit', (c) => r(c)));
  if (code !== 0) throw new Error(`load generator failed (${code}):\n${child.output().slice(-4000)}`);
  const result = JSON.parse(readFileSync(out, 'utf8')) as LoadResult;
  rmSync(dir, { recursive: true, force: true });
  return result;
}

/** The admin API of a running service. */
export function admin(baseUrl: string, token = BENCH_ADMIN_TOKEN) {
  return async (method: string, path: string, body?: unknown): Promise<any> => {
    const r = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    if (r.status >= 300) throw new Error(`${method} ${path} answered ${r.status}: ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
}

/** Plans for the bench: nothing throttles (PLAN_LIMITS replaces the built-in table). */
export const BENCH_PLAN_LIMITS = JSON.stringify({
  free: { rps: 10, burst: 20 },
  enterprise: { rps: 1_000_000, burst: 1_000_000 },
});
