/**
 * The data teams' command-line tool (node dist/services/bin/datateam.js, built first) as a script uses it: against
 * the real service in this process (embedded default) for dead letters, export, decode and replay; against a tiny
 * fake of the replay routes for the end states a real replay cannot be made to reach on cue (failed; cancelled while
 * it is watched). Exit codes are checked everywhere: a script branches on them.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Topics } from '../../services/shared/topics.js';
import { webEvent } from '../helpers/factories.js';
import { eventually } from '../helpers/forwarder-rig.js';
import { REPO_ROOT } from '../helpers/service-process.js';
import { startServiceWithSandbox, type ServiceWithSandbox } from '../helpers/service-with-sandbox.js';

const ADMIN = 'datateam-cli-admin-token';
const CLI = join(REPO_ROOT, 'dist', 'services', 'bin', 'datateam.js');
let svc: ServiceWithSandbox;

beforeAll(async () => {
  if (!existsSync(CLI)) throw new Error('build first: make build-dev (make test does)');
  svc = await startServiceWithSandbox(ADMIN);
});
afterAll(async () => {
  await svc?.close();
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}
function cli(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH, ADMIN_TOKEN: ADMIN, ...env }, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}
const withUrl = (...args: string[]): string[] => [...args, '--url', svc.url];
const jsonLines = (text: string): any[] => text.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));

async function workspaceWithStageLetters(n: number): Promise<string> {
  const ws = (await svc.admin.createWorkspace('cli')).id;
  const records = Array.from({ length: n }, (_, i) => ({ key: `${ws}:broken-${i}`, value: { v: 1, workspace_id: ws } }));
  await svc.service.log!.append(Topics.eventsRaw, records, Date.now() + 10_000);
  await eventually(`${n} dead letters`, async () => {
    const r = await svc.admin.call('GET', `/admin/v1/workspaces/${ws}/dead-letters`);
    return r.body.items.length === n;
  });
  return ws;
}

describe('dlq', () => {
  it('lists, redrives and discards, with exit codes', async () => {
    const ws = await workspaceWithStageLetters(2);
    const listed = await cli(withUrl('dlq', 'list', ws, '--json'));
    expect(listed.code, listed.stderr).toBe(0);
    const letters = jsonLines(listed.stdout);
    expect(letters.map((l) => l.stage)).toEqual(['dedupe', 'dedupe']);
    expect(listed.stderr).toContain('2 dead letter(s)');

    const table = await cli(withUrl('dlq', 'list', ws));
    expect(table.stdout.trim().split('\n')).toHaveLength(2);
    expect(table.stdout).toContain(`${letters[0].id}\tdedupe\tinvalid_envelope\tattempts=1`);

    const redriven = await cli(withUrl('dlq', 'redrive', ws, '--all'));
    expect(redriven.code, redriven.stderr).toBe(0);
    expect(JSON.parse(redriven.stdout)).toEqual({ redriven: 2, failed: [] });
    // They fail in their stage again: back, attempts raised.
    await eventually('attempts 2', async () => {
      const r = await cli(withUrl('dlq', 'list', ws, '--json'));
      return jsonLines(r.stdout).every((l) => l.attempts === 2) && jsonLines(r.stdout).length === 2;
    });

    const discarded = await cli(withUrl('dlq', 'discard', ws, letters[0].id));
    expect(discarded.code, discarded.stderr).toBe(0);
    expect(jsonLines((await cli(withUrl('dlq', 'list', ws, '--json'))).stdout).map((l) => l.id)).toEqual([letters[1].id]);
    // Gone: not found.
    expect((await cli(withUrl('dlq', 'discard', ws, letters[0].id))).code).toBe(4);
  });

  it.each([
    ['no command', [], 2],
    ['an unknown command', ['frobnicate'], 2],
    ['an unknown option', ['dlq', 'list', 'ws_x', '--bogus'], 2],
    ['redrive without ids or --all', ['dlq', 'redrive', 'ws_x'], 2],
    ['redrive with both', ['dlq', 'redrive', 'ws_x', '--all', 'dl_0123456789abcdef'], 2],
    ['export without --from', ['export', 'ws_x', '--to', '2026-01-01T00:00:00Z'], 2],
    ['a bad time', ['replay', 'ws_x', '--from', 'yesterday', '--to', '2026-01-01T00:00:00Z'], 2],
    ['a bare date', ['replay', 'ws_x', '--from', '2026-01-01', '--to', 'now'], 2],
    ['a duration in an unknown unit', ['replay', 'ws_x', '--from', '2w', '--to', 'now'], 2],
    ['a duration without a number', ['export', 'ws_x', '--from', 'h', '--to', 'now'], 2],
    ['an unknown workspace', ['dlq', 'list', 'ws_nope'], 4],
    ['a malformed letter id (refused by the service)', ['dlq', 'redrive', 'ws_nope', 'nope'], 3],
  ])('exits with the documented code on %s', async (_what, args, code) => {
    const r = await cli(withUrl(...(args as string[])));
    expect(r.code, r.stderr).toBe(code);
    expect(r.stderr.length).toBeGreaterThan(0);
  });

  it('exits 5 without or with a wrong ADMIN_TOKEN, and 6 when the service cannot be reached', async () => {
    expect((await cli(withUrl('dlq', 'list', 'ws_x'), { ADMIN_TOKEN: undefined })).code).toBe(5);
    expect((await cli(withUrl('dlq', 'list', 'ws_x'), { ADMIN_TOKEN: 'wrong' })).code).toBe(5);
    const down = await cli(['dlq', 'list', 'ws_x', '--url', 'http://127.0.0.1:1']);
    expect(down.code).toBe(6);
    expect(down.stderr).toContain('cannot reach');
  });
});

describe('export and decode', () => {
  it('exports a range to a file and to stdout, and decodes the embedded log through the service', async () => {
    const ws = (await svc.admin.createWorkspace('cli-export')).id;
    const key = (await svc.admin.createKey(ws, 'live')).key;
    const from = new Date(Date.now() - 1).toISOString();
    const events = [webEvent(), webEvent(), webEvent()];
    const r = await fetch(`${svc.url}/v1/events`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(events) });
    expect(r.status).toBe(202);
    const to = new Date(Date.now() + 1).toISOString();
    const file = join(mkdtempSync(join(tmpdir(), 'cli-export-')), 'events.ndjson');

    const toFile = await cli(withUrl('export', ws, '--from', from, '--to', to, '--out', file));
    expect(toFile.code, toFile.stderr).toBe(0);
    expect(toFile.stderr).toContain(`3 event(s) exported to ${file}`);
    expect(jsonLines(readFileSync(file, 'utf8')).map((e) => e.idempotency_key)).toEqual(events.map((e) => e.event_metadata.idempotency_key));
    const toStdout = await cli(withUrl('export', ws, '--from', from, '--to', to));
    expect(toStdout.code).toBe(0);
    expect(jsonLines(toStdout.stdout)).toHaveLength(3);

    const decoded = await cli(withUrl('decode', 'events.raw', '--from-beginning', '--key-prefix', `${ws}:`));
    expect(decoded.code, decoded.stderr).toBe(0);
    const records = jsonLines(decoded.stdout);
    expect(records.map((x) => x.value.idempotency_key)).toEqual(events.map((e) => e.event_metadata.idempotency_key));
    expect(records[0]).toMatchObject({ topic: 'events.raw', partition: 0, key: expect.stringContaining(`${ws}:`) });
    const last = await cli(withUrl('decode', 'events.raw', '--last', '1'));
    expect(jsonLines(last.stdout)).toHaveLength(1);
    expect((await cli(withUrl('decode', 'no.such.topic'))).code).toBe(3);

    // The same decode through bin/decode.js (no Kafka configured: it asks the service).
    const viaDecode = await new Promise<Run>((resolve) =>
      execFile(process.execPath, [join(REPO_ROOT, 'dist', 'services', 'bin', 'decode.js'), 'events.raw', '--from-beginning', '--key-prefix', `${ws}:`, '--url', svc.url], { env: { PATH: process.env.PATH, ADMIN_TOKEN: ADMIN } }, (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      ),
    );
    expect(viaDecode.code, viaDecode.stderr).toBe(0);
    expect(jsonLines(viaDecode.stdout)).toHaveLength(3);
  });
});

describe('decode.js command line', () => {
  const decodeCli = (args: string[]): Promise<Run> =>
    new Promise((resolve) => {
      execFile(process.execPath, [join(REPO_ROOT, 'dist', 'services', 'bin', 'decode.js'), ...args], { env: { PATH: process.env.PATH, ADMIN_TOKEN: ADMIN } }, (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });

  it('reads the last N records of a topic through the service', async () => {
    const ws = await workspaceWithStageLetters(2);
    const r = await decodeCli(['events.raw', '--last', '2', '--key-prefix', `${ws}:`, '--url', svc.url]);
    expect(r.code, r.stderr).toBe(0);
    expect(jsonLines(r.stdout).map((l) => l.key)).toEqual([`${ws}:broken-0`, `${ws}:broken-1`]);
  });

  it.each([
    ['no topic', []],
    ['an unknown option', ['events.raw', '--bogus']],
    ['--last without a number', ['events.raw', '--last', 'ten']],
    ['--last without a value', ['events.raw', '--last']],
    ['a second topic', ['events.raw', 'events.dlq']],
  ])('exits 2 with the usage on %s', async (_what, args) => {
    const r = await decodeCli([...args, '--url', svc.url]);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain('usage: bin/decode.js');
  });
});

describe('replay (the real service)', () => {
  it('replays purchases sent before the setup and watches the job to the end (exit 0); a second run sends nothing', async () => {
    const { ws, key } = await svc.bareWorkspace('cli-replay');
    const from = new Date(Date.now() - 60_000).toISOString();
    await svc.send(key, [webEvent(), webEvent(), webEvent()]);
    await svc.drained();
    await svc.setUpForwarding(ws);
    const to = new Date(Date.now() + 60_000).toISOString();
    const first = await cli(withUrl('replay', ws, '--from', from, '--to', to, '--poll-ms', '50'));
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout.trim().split('\n').at(-1)!)).toMatchObject({ status: 'done', progress: 1, events_read: 3, conversions_sent: 3 });
    const dry = await cli(withUrl('replay', ws, '--from', from, '--to', to, '--dry-run', '--poll-ms', '50'));
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout.trim().split('\n').at(-1)!)).toMatchObject({ status: 'done', dry_run: true, conversions_sent: 0, skipped_already_sent: 3 });
  });

  it('exits 3 when the service refuses (out of retention, cancelling a finished job) and 4 for an unknown replay', async () => {
    const { ws } = await svc.bareWorkspace('cli-replay-bad');
    const old = await cli(withUrl('replay', ws, '--from', '2020-01-01T00:00:00Z', '--to', '2020-01-02T00:00:00Z'));
    expect(old.code).toBe(3);
    expect(old.stderr).toContain('RAW_LOG_RETENTION_DAYS');
    const started = await cli(withUrl('replay', ws, '--from', new Date(Date.now() - 60_000).toISOString(), '--to', new Date().toISOString(), '--no-wait'));
    expect(started.code, started.stderr).toBe(0);
    const { id } = JSON.parse(started.stdout);
    expect((await cli(withUrl('replay', 'watch', ws, id, '--poll-ms', '50'))).code).toBe(0);
    expect((await cli(withUrl('replay', 'cancel', ws, id))).code).toBe(3);
    expect((await cli(withUrl('replay', 'watch', ws, 'rpl_nope'))).code).toBe(4);
  });
});

describe('replay (against a fake of the contract\'s replay routes: end states a real run cannot reach on cue)', () => {
  let fake: Server;
  let fakeUrl: string;
  const seen: string[] = [];
  /** Each replay moves a third of the way per poll; ws_fail's replays end failed. */
  const replays = new Map<string, { ws: string; polls: number; body: any; cancelled: boolean }>();
  beforeAll(async () => {
    fake = createServer((req, res) => {
      let raw = '';
      req.on('data', (c) => (raw += c));
      req.on('end', () => {
        seen.push(`${req.method} ${req.url}`);
        const send = (status: number, body?: unknown) => {
          res.writeHead(status, { 'content-type': status >= 400 ? 'application/problem+json' : 'application/json' });
          res.end(body === undefined ? '' : JSON.stringify(body));
        };
        if (req.headers.authorization !== `Bearer ${ADMIN}`) return send(401, { status: 401, title: 'Unauthorized' });
        const m = /^\/admin\/v1\/workspaces\/([^/]+)\/replays(?:\/([^/?]+))?$/.exec(req.url ?? '');
        if (!m) return send(404, { status: 404, detail: 'no route' });
        const [, ws, id] = m;
        if (req.method === 'POST' && !id) {
          const newId = `rp_${replays.size + 1}`;
          replays.set(newId, { ws: ws!, polls: 0, body: JSON.parse(raw), cancelled: false });
          return send(202, { id: newId, status: 'queued' });
        }
        const r = replays.get(id ?? '');
        if (!r || r.ws !== ws) return send(404, { status: 404, detail: `no replay ${id}` });
        if (req.method === 'DELETE') {
          r.cancelled = true;
          return send(204);
        }
        r.polls++;
        const progress = Math.min(1, r.polls / 3);
        const status = r.cancelled ? 'cancelled' : progress < 1 ? 'running' : ws === 'ws_fail' ? 'failed' : 'done';
        send(200, { id, status, ...r.body, progress, events_read: r.polls * 10, conversions_built: r.polls * 5, conversions_sent: r.polls * 4, skipped_already_sent: 0, dropped: {} });
      });
    });
    await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
    fakeUrl = `http://127.0.0.1:${(fake.address() as { port: number }).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => fake.close(() => resolve())));
  const range = ['--from', '2026-11-01T00:00:00Z', '--to', '2026-11-02T00:00:00Z'];

  it('starts a replay with the contract\'s body and watches it until done (exit 0)', async () => {
    const r = await cli(['replay', 'ws_a', ...range, '--dry-run', '--resend', '--poll-ms', '50', '--url', fakeUrl]);
    expect(r.code, r.stderr).toBe(0);
    const [first] = [...replays.values()];
    expect(first!.body).toEqual({ from: '2026-11-01T00:00:00Z', to: '2026-11-02T00:00:00Z', dry_run: true, resend: true });
    expect(JSON.parse(r.stdout.trim().split('\n').at(-1)!)).toMatchObject({ status: 'done', progress: 1, conversions_sent: 12 });
  });

  it('takes now and durations ago for --from and --to, and sends them as RFC 3339 times', async () => {
    const before = Date.now();
    const r = await cli(['replay', 'ws_rel', '--from', '2h', '--to', 'now', '--no-wait', '--url', fakeUrl]);
    expect(r.code, r.stderr).toBe(0);
    const { id } = JSON.parse(r.stdout);
    const { body } = replays.get(id)!;
    expect(body.from).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Date.parse(body.to) - Date.parse(body.from)).toBe(2 * 3_600_000);
    expect(Date.parse(body.to)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(body.to)).toBeLessThanOrEqual(Date.now());
    for (const [arg, ms] of [['90m', 90 * 60_000], ['7d', 7 * 86_400_000]] as const) {
      const d = await cli(['replay', 'ws_rel', '--from', arg, '--to', '2099-01-01T00:00:00Z', '--no-wait', '--url', fakeUrl]);
      expect(d.code, d.stderr).toBe(0);
      const sent = replays.get(JSON.parse(d.stdout).id)!.body;
      expect(Math.abs(Date.now() - ms - Date.parse(sent.from))).toBeLessThan(60_000);
      expect(sent.to).toBe('2099-01-01T00:00:00Z');
    }
  });

  it('exits 1 when the replay fails or is cancelled, 4 for an unknown replay', async () => {
    expect((await cli(['replay', 'ws_fail', ...range, '--poll-ms', '50', '--url', fakeUrl])).code).toBe(1);
    const started = await cli(['replay', 'ws_b', ...range, '--no-wait', '--url', fakeUrl]);
    expect(started.code).toBe(0);
    const { id } = JSON.parse(started.stdout);
    expect((await cli(['replay', 'cancel', 'ws_b', id, '--url', fakeUrl])).code).toBe(0);
    expect((await cli(['replay', 'watch', 'ws_b', id, '--poll-ms', '50', '--url', fakeUrl])).code).toBe(1);
    expect((await cli(['replay', 'watch', 'ws_b', 'rp_nope', '--url', fakeUrl])).code).toBe(4);
    expect(seen).toContain(`DELETE /admin/v1/workspaces/ws_b/replays/${id}`);
  });
});
