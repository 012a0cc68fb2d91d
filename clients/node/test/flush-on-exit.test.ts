/**
 * Flush on shutdown as a host process meets it: a script that queues events and simply ends, and one stopped by
 * SIGTERM with `handleSignals`, both deliver what they queued to the real service before the process exits.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminClient } from '../../../test/helpers/admin-client.js';
import { TEST_ADMIN_TOKEN, startServiceProcess, type ServiceProcess } from '../../../test/helpers/service-process.js';
import { startFaultProxy, type FaultProxy } from './fault-proxy.js';

const DIST = join(import.meta.dirname, '..', 'dist', 'index.js');
let svc: ServiceProcess;
let proxy: FaultProxy;
let key: string;

beforeAll(async () => {
  svc = await startServiceProcess();
  const admin = adminClient(svc.url, TEST_ADMIN_TOKEN);
  key = (await admin.createKey((await admin.createWorkspace('exit')).id, 'live')).key;
  proxy = await startFaultProxy(() => svc.url);
});
afterAll(async () => {
  await proxy?.close();
  if (svc?.child.exitCode === null) await svc.kill();
});

/** A host program: queues `n` events (a long flush interval, so only the exit path sends them). */
const program = (n: number, tail: string) => `
import { createClient } from ${JSON.stringify(DIST)};
const client = createClient({ baseUrl: process.env.BASE_URL, apiKey: process.env.API_KEY, flushIntervalMs: 600000, handleSignals: ${tail === 'signal'} });
for (let i = 0; i < ${n}; i++) client.track({
  event_name: 'purchase', event_source: 'SERVER', event_data: { i }, event_metadata: { idempotency_key: process.env.PREFIX + i, identifiers: {},
  consent: { analytics_storage: 'GRANTED', ad_storage: 'GRANTED', ad_user_data: 'GRANTED', ad_personalization: 'GRANTED' } } });
${tail === 'signal' ? "process.stdout.write('queued\\n'); setInterval(() => {}, 1000);" : ''}
`;

function runHost(source: string, prefix: string) {
  const child = spawn(process.execPath, ['--input-type=module', '-e', source], {
    env: { PATH: process.env.PATH ?? '', BASE_URL: proxy.url, API_KEY: key, PREFIX: prefix },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return { child, exit, output: () => out };
}

const acceptedKeys = (prefix: string) => proxy.seen.filter((r) => r.status === 202).flatMap((r) => r.keys).filter((k) => k.startsWith(prefix));

describe('flush on shutdown', () => {
  it('a program that just ends sends what it queued before exiting', async () => {
    const host = runHost(program(25, ''), 'exit-');
    const { code } = await host.exit;
    expect(code, host.output()).toBe(0);
    expect(acceptedKeys('exit-').sort()).toEqual(Array.from({ length: 25 }, (_, i) => `exit-${i}`).sort());
  });

  it('SIGTERM with handleSignals: flushes, then ends as SIGTERM asks', async () => {
    const host = runHost(program(10, 'signal'), 'term-');
    while (!host.output().includes('queued')) await new Promise((r) => setTimeout(r, 20));
    expect(acceptedKeys('term-')).toEqual([]);
    host.child.kill('SIGTERM');
    const { signal } = await host.exit;
    expect(signal).toBe('SIGTERM');
    expect(acceptedKeys('term-')).toHaveLength(10);
  });
});
