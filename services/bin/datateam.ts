/**
 * The data teams' command-line tool: replays, dead letters, exports and topic decoding over the admin API, on
 * either runtime (it speaks HTTP only). README, "For data teams", documents it; exit codes: cli/admin-http.ts Exit.
 *
 *   ADMIN_TOKEN=… node dist/services/bin/datateam.js <command> [--url http://localhost:8080] …
 */
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { parseArgs } from 'node:util';
import { adminHttp, CliError, decodeOverHttp, Exit, ndjsonLines, progressBar, usageError, writeLine, type AdminHttp } from './cli/admin-http.js';

const USAGE = `usage: datateam <command> [options]        (ADMIN_TOKEN in the environment; --url, default http://localhost:$PORT)

  replay <ws> --from T --to T [--dry-run] [--resend] [--no-wait]
                                 start a replay of [from, to) and watch it until done (progress bar, ETA)
  replay watch <ws> <replay-id>  watch a running replay until done
  replay cancel <ws> <replay-id> cancel it
  dlq list <ws> [--stage S] [--status dead|redriven] [--json]
                                 the workspace's dead letters, all pages
  dlq redrive <ws> (--all | <id>…)  send letters back through their stage under today's setup
  dlq discard <ws> <id>…         delete letters for good (each leaves an audit entry)
  export <ws> --from T --to T [--out FILE]
                                 the accepted events of [from, to) as NDJSON, to FILE or stdout (progress on stderr)
  decode <topic> [--last N | --from-beginning] [--key-prefix P]
                                 a topic's records, decoded, as NDJSON (both runtimes, through the service)

Times are RFC 3339 (2026-11-22T00:00:00Z), \`now\`, or a duration ago: 90m, 2h, 7d (--from 2h --to now). Exit codes: 0 ok, 1 the operation did not succeed (replay failed or
cancelled, letters failed to redrive), 2 bad command line, 3 request refused (4xx), 4 not found, 5 ADMIN_TOKEN
missing or wrong, 6 service unreachable, failing (5xx) or stream broken off.`;

const OPTIONS = {
  url: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  'dry-run': { type: 'boolean' },
  resend: { type: 'boolean' },
  'no-wait': { type: 'boolean' },
  stage: { type: 'string' },
  status: { type: 'string' },
  json: { type: 'boolean' },
  all: { type: 'boolean' },
  out: { type: 'string' },
  last: { type: 'string' },
  'from-beginning': { type: 'boolean' },
  'key-prefix': { type: 'string' },
  'poll-ms': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Values = ReturnType<typeof parse>['values'];
const parse = (argv: string[]) => parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });

const enc = encodeURIComponent;
const out = (line: string): void => void process.stdout.write(`${line}\n`);
const err = (line: string): void => void process.stderr.write(`${line}\n`);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** An RFC 3339 time as given, or `now` / a duration ago (`90m`, `2h`, `7d`) as the RFC 3339 time it means. */
function time(name: string, v: string | undefined, now = Date.now()): string {
  if (!v) throw usageError(`--${name} is required (an RFC 3339 time such as 2026-11-22T00:00:00Z, now, or a duration ago: 90m, 2h, 7d)`);
  if (v === 'now') return new Date(now).toISOString();
  const ago = /^(\d{1,6})([mhd])$/.exec(v);
  if (ago) return new Date(now - Number(ago[1]) * UNIT_MS[ago[2] as keyof typeof UNIT_MS]).toISOString();
  if (!/^\d{4}-\d\d-\d\dT/.test(v) || Number.isNaN(Date.parse(v))) {
    throw usageError(`--${name}: "${v}" is neither an RFC 3339 time, now, nor a duration ago (90m, 2h, 7d)`);
  }
  return v;
}
function positional(list: string[], i: number, what: string): string {
  const v = list[i];
  if (!v) throw usageError(`missing ${what}`);
  return v;
}

// ---- replay ---------------------------------------------------------------------------------------------------

const DONE = new Set(['done', 'failed', 'cancelled']);

async function watchReplay(http: AdminHttp, ws: string, id: string, pollMs: number): Promise<number> {
  const path = `/admin/v1/workspaces/${enc(ws)}/replays/${enc(id)}`;
  const bar = progressBar(`replay ${id}`, 1000, 'events {events_read} | built {built} | queued {queued} | parked {parked}', {
    events_read: 0,
    built: 0,
    queued: 0,
    parked: 0,
  });
  let r: any;
  try {
    for (;;) {
      r = await http.json('GET', path);
      bar.update(Math.round(Math.min(1, Math.max(0, Number(r.progress) || 0)) * 1000), {
        events_read: r.events_read ?? 0,
        built: r.conversions_built ?? 0,
        queued: r.conversions_queued ?? r.conversions_sent ?? 0,
        parked: r.conversions_parked ?? 0,
      });
      if (DONE.has(r.status)) break;
      await sleep(pollMs);
    }
  } finally {
    bar.stop();
  }
  out(JSON.stringify(r));
  if (r.status !== 'done') err(`replay ${id} ended ${r.status}`);
  return r.status === 'done' ? Exit.ok : Exit.failed;
}

async function replay(http: AdminHttp, args: string[], v: Values): Promise<number> {
  const pollMs = v['poll-ms'] ? Number(v['poll-ms']) : 1000;
  if (!Number.isInteger(pollMs) || pollMs < 50) throw usageError('--poll-ms: a whole number of milliseconds, at least 50');
  if (args[0] === 'watch') return watchReplay(http, positional(args, 1, '<ws>'), positional(args, 2, '<replay-id>'), pollMs);
  if (args[0] === 'cancel') {
    const ws = positional(args, 1, '<ws>');
    const id = positional(args, 2, '<replay-id>');
    await http.json('DELETE', `/admin/v1/workspaces/${enc(ws)}/replays/${enc(id)}`);
    err(`replay ${id} cancelled`);
    return Exit.ok;
  }
  const ws = positional(args, 0, '<ws>');
  if (args.length > 1) throw usageError(`unexpected ${args[1]}`);
  // One reading of the clock for both ends: `--from 2h --to now` is two hours exactly.
  const now = Date.now();
  const body = { from: time('from', v.from, now), to: time('to', v.to, now), dry_run: v['dry-run'] ?? false, resend: v.resend ?? false };
  const started = await http.json<{ id: string; status: string }>('POST', `/admin/v1/workspaces/${enc(ws)}/replays`, body);
  if (v['no-wait']) {
    out(JSON.stringify(started));
    return Exit.ok;
  }
  err(`replay ${started.id} ${started.status}; Ctrl-C stops watching (the replay goes on: \`replay cancel\` stops it)`);
  return watchReplay(http, ws, started.id, pollMs);
}

// ---- dead letters ---------------------------------------------------------------------------------------------

async function dlq(http: AdminHttp, args: string[], v: Values): Promise<number> {
  const [sub, ws, ...ids] = args;
  if (!ws) throw usageError('missing <ws>');
  const base = `/admin/v1/workspaces/${enc(ws)}/dead-letters`;
  switch (sub) {
    case 'list': {
      if (ids.length > 0) throw usageError(`unexpected ${ids[0]}`);
      const q = new URLSearchParams({ limit: '500' });
      if (v.stage) q.set('stage', v.stage);
      if (v.status) q.set('status', v.status);
      let n = 0;
      for (let cursor: string | null = null; ; ) {
        if (cursor) q.set('cursor', cursor);
        const page: { items: any[]; next: string | null } = await http.json('GET', `${base}?${q}`);
        for (const l of page.items) {
          n++;
          if (v.json) out(JSON.stringify(l));
          else out([l.id, l.stage, l.reason, `attempts=${l.attempts}`, l.last_failed_at, l.event_id ?? '-', (l.error ?? '').slice(0, 120)].join('\t'));
        }
        cursor = page.next;
        if (!cursor) break;
      }
      err(`${n} dead letter(s)`);
      return Exit.ok;
    }
    case 'redrive': {
      if (Boolean(v.all) === (ids.length > 0)) throw usageError('dlq redrive: give --all or the letter ids, not both');
      const r = await http.json<{ redriven: number; failed: Array<{ id: string; error: string }> }>('POST', `${base}/redrive`, v.all ? { all: true } : { ids });
      out(JSON.stringify(r));
      for (const f of r.failed ?? []) err(`${f.id}: ${f.error}`);
      return (r.failed ?? []).length > 0 ? Exit.failed : Exit.ok;
    }
    case 'discard': {
      if (ids.length === 0) throw usageError('dlq discard: give the letter ids');
      for (const id of ids) {
        await http.json('DELETE', `${base}/${enc(id)}`);
        err(`${id} discarded`);
      }
      return Exit.ok;
    }
    default:
      throw usageError(`dlq: unknown subcommand ${sub ?? ''} (list, redrive, discard)`);
  }
}

// ---- export and decode ----------------------------------------------------------------------------------------

async function exportEvents(http: AdminHttp, args: string[], v: Values): Promise<number> {
  const ws = positional(args, 0, '<ws>');
  if (args.length > 1) throw usageError(`unexpected ${args[1]}`);
  const now = Date.now();
  const from = time('from', v.from, now);
  const to = time('to', v.to, now);
  const r = await http.stream(`/admin/v1/workspaces/${enc(ws)}/events/export?from=${enc(from)}&to=${enc(to)}`);
  const target = v.out ? createWriteStream(v.out) : process.stdout;
  // Lines come in log order, close to time order: the share of the range covered so far is the progress.
  const [start, end] = [Date.parse(from), Date.parse(to)];
  const bar = progressBar(`export ${ws}`, 1000, '{lines} events', { lines: 0 });
  let lines = 0;
  try {
    for await (const line of ndjsonLines(r)) {
      if (line === '') continue;
      await writeLine(target, line);
      lines++;
      const at = (JSON.parse(line) as { received_at?: number }).received_at ?? start;
      bar.update(Math.round(Math.min(1, Math.max(0, (at - start) / (end - start))) * 1000), { lines });
    }
    bar.update(1000, { lines });
  } finally {
    bar.stop();
    if (target !== process.stdout) {
      target.end();
      await once(target, 'close');
    }
  }
  err(`${lines} event(s) exported${v.out ? ` to ${v.out}` : ''}`);
  return Exit.ok;
}

async function decode(http: AdminHttp, args: string[], v: Values): Promise<number> {
  const topic = positional(args, 0, '<topic>');
  if (v.last !== undefined && !/^[1-9]\d*$/.test(v.last)) throw usageError('--last: a positive whole number');
  if (v.last !== undefined && v['from-beginning']) throw usageError('--last and --from-beginning exclude each other');
  return decodeOverHttp(http, topic, { last: v.last ? BigInt(v.last) : undefined, fromBeginning: v['from-beginning'] ?? false, keyPrefix: v['key-prefix'] ?? '' });
}

// ---- main -----------------------------------------------------------------------------------------------------

export async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parse(argv);
  } catch (e) {
    err(`${(e as Error).message}\n\n${USAGE}`);
    return Exit.usage;
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.help || !command) {
    (values.help ? out : err)(USAGE);
    return values.help ? Exit.ok : Exit.usage;
  }
  try {
    const http = adminHttp(values.url, process.env.ADMIN_TOKEN);
    switch (command) {
      case 'replay':
        return await replay(http, rest, values);
      case 'dlq':
        return await dlq(http, rest, values);
      case 'export':
        return await exportEvents(http, rest, values);
      case 'decode':
        return await decode(http, rest, values);
      default:
        throw usageError(`unknown command ${command}`);
    }
  } catch (e) {
    if (!(e instanceof CliError)) throw e;
    err(e.code === Exit.usage ? `${e.message}\n\n${USAGE}` : e.message);
    return e.code;
  }
}

// `… | head`: a closed pipe ends the output, not with a stack trace.
process.stdout.on('error', (e: NodeJS.ErrnoException) => process.exit(e.code === 'EPIPE' ? 0 : Exit.unavailable));
process.exitCode = await main(process.argv.slice(2)).catch((e: unknown) => {
  err(`unexpected error: ${(e as Error).stack ?? String(e)}`);
  return Exit.unavailable;
});
