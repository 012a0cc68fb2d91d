/**
 * Starting the service as an operator does (`node dist/services/compose/main.js`): a generated admin token is on
 * stdout before /readyz answers 200, and a start that cannot listen says why in one line and writes nothing into
 * DATA_DIR (no credentials.key that a later start would then trust).
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePorts } from '../sandbox/ports.js';
import { REPO_ROOT } from '../helpers/service-process.js';

const MAIN = join(REPO_ROOT, 'dist', 'services', 'compose', 'main.js');
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

async function takePort(): Promise<number> {
  const taken = createServer();
  servers.push(taken);
  await new Promise<void>((r) => taken.listen(0, '127.0.0.1', () => r()));
  return (taken.address() as AddressInfo).port;
}

describe('a start on a port already in use', () => {
  it.each([
    ['PORT', 'a fresh DATA_DIR', false],
    ['METRICS_PORT', 'a fresh DATA_DIR', false],
    ['PORT', 'a DATA_DIR with its key', true],
  ])('%s taken, %s: one line naming it, exit code 1, DATA_DIR as it was', async (variable, _what, keyBefore) => {
    const busy = await takePort();
    const [free] = await freePorts(1);
    const dataDir = join(mkdtempSync(join(tmpdir(), 'start-')), 'data');
    if (keyBefore) {
      spawnSync('mkdir', ['-p', dataDir]);
      writeFileSync(join(dataDir, 'credentials.key'), `${Buffer.alloc(32, 7).toString('base64')}\n`);
    }
    const before = existsSync(dataDir) ? readdirSync(dataDir).sort() : null;
    const r = spawnSync(process.execPath, [MAIN], {
      env: {
        PATH: process.env.PATH,
        DATA_DIR: dataDir,
        HOST: '127.0.0.1',
        LOG_LEVEL: 'silent',
        PORT: String(variable === 'PORT' ? busy : free),
        METRICS_PORT: String(variable === 'METRICS_PORT' ? busy : free),
      },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.status, r.stderr).toBe(1);
    expect(r.stderr.trim().split('\n')).toEqual([`invalid configuration: ${variable} ${busy} is already in use on 127.0.0.1`]);
    // Nothing was printed as if the service had started: no admin token for a service that is not there.
    expect(r.stdout).not.toContain('ADMIN_TOKEN');
    expect(existsSync(dataDir) ? readdirSync(dataDir).sort() : null).toEqual(before);
  });
});

describe('the generated admin token', () => {
  it('is on stdout before /readyz answers 200, and opens the admin API', { timeout: 90_000 }, async () => {
    const [port, metricsPort] = (await freePorts(2)) as [number, number];
    const child = spawn(process.execPath, [MAIN], {
      env: {
        PATH: process.env.PATH,
        DATA_DIR: mkdtempSync(join(tmpdir(), 'start-token-')),
        HOST: '127.0.0.1',
        LOG_LEVEL: 'warn',
        PORT: String(port),
        METRICS_PORT: String(metricsPort),
        GATEWAY_MAX_EVENT_LOOP_DELAY_MS: '0',
        // The most acceptors: the longest stretch of the start after the first port is up.
        GATEWAY_ACCEPTORS: '256',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', r));
    try {
      let seenAtReady: string | undefined;
      const deadline = Date.now() + 60_000;
      while (seenAtReady === undefined) {
        if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode}:\n${out}`);
        if (Date.now() > deadline) throw new Error(`not ready within 60 s:\n${out}`);
        // Either port's /readyz, asked back to back (no pause): the first 200 must find the token already printed.
        for (const p of [metricsPort, port]) {
          const ready = await fetch(`http://127.0.0.1:${p}/readyz`).then((r) => r.status === 200, () => false);
          if (ready) {
            seenAtReady = out;
            break;
          }
        }
        if (seenAtReady === undefined) await new Promise((r) => setTimeout(r, 5));
      }
      const token = /the admin API token for this run is:\n\n {2}(\S+)\n/.exec(seenAtReady)?.[1];
      expect(token, seenAtReady).toBeDefined();
      const list = await fetch(`http://127.0.0.1:${port}/admin/v1/workspaces`, { headers: { authorization: `Bearer ${token}` } });
      expect(list.status).toBe(200);
      const wrong = await fetch(`http://127.0.0.1:${port}/admin/v1/workspaces`, { headers: { authorization: `Bearer ${token}x` } });
      expect(wrong.status).toBe(401);
    } finally {
      // Possibly before its signal handlers are installed (the acceptors may still be starting): any exit will do.
      child.kill('SIGTERM');
      await exited;
    }
  });
});
