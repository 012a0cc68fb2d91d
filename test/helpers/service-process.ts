/**
 * Starts the real service as a child process (`node dist/services/compose/main.js`, built by `make test`), the way an
 * operator runs it, and talks to it over HTTP. Used by e2e and reliability tests (kill -9, restarts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll } from 'vitest';
import { freePorts } from '../sandbox/ports.js';

export const REPO_ROOT = resolve(import.meta.dirname, '..', '..');
export const TEST_ADMIN_TOKEN = 'test-admin-token-0123456789';

export interface ServiceProcess {
  readonly url: string;
  readonly metricsUrl: string;
  readonly dataDir: string;
  readonly env: Record<string, string>;
  readonly child: ChildProcess;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  /** SIGTERM and wait for exit; resolves the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL (kill -9) and wait. */
  kill(): Promise<void>;
}

export interface StartOptions {
  /** Reuse a data dir (restart after a crash). */
  readonly dataDir?: string;
  readonly env?: Record<string, string>;
  readonly readyTimeoutMs?: number;
}

/**
 * Data directories startServiceProcess made, removed after the importing file's tests (this hook, registered when the
 * file imports the helper, runs after the file's own): a test may start a service again on one after stopping it
 * (the crash tests), and a pipeline's store takes up to ~1 GB.
 */
const madeDataDirs = new Set<string>();
afterAll(() => {
  for (const dir of madeDataDirs) rmSync(dir, { recursive: true, force: true });
  madeDataDirs.clear();
});

export async function startServiceProcess(opts: StartOptions = {}): Promise<ServiceProcess> {
  const [port, metricsPort] = (await freePorts(2)) as [number, number];
  let dataDir = opts.dataDir;
  if (dataDir === undefined) madeDataDirs.add((dataDir = mkdtempSync(join(tmpdir(), 'evsvc-'))));
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/tmp',
    PORT: String(port),
    HOST: '127.0.0.1',
    METRICS_PORT: String(metricsPort),
    DATA_DIR: dataDir,
    ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    LOG_LEVEL: 'warn',
    // Event-loop shedding off unless a test asks for it (see test/helpers/in-process.ts).
    GATEWAY_MAX_EVENT_LOOP_DELAY_MS: '0',
    ...opts.env,
  };
  const child = spawn(process.execPath, [join(REPO_ROOT, 'dist', 'services', 'compose', 'main.js')], {
    env,
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = `http://127.0.0.1:${env.PORT}`;
  const deadline = Date.now() + (opts.readyTimeoutMs ?? 30_000);
  for (;;) {
    if (child.exitCode !== null) throw new Error(`service exited with ${child.exitCode} before ready:\n${out}`);
    try {
      const r = await fetch(`${url}/readyz`);
      if (r.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`service not ready within timeout:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    metricsUrl: `http://127.0.0.1:${env.METRICS_PORT}/metrics`,
    dataDir,
    env,
    child,
    output: () => out,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
    async kill() {
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
