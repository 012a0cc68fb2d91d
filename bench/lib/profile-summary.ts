/**
 * Turns a V8 `.cpuprofile` (node --cpu-prof) into tables: top functions by self time, top by inclusive time, and
 * self time by area (our code per folder, each npm package, node internals, GC, idle). No clinic, no flame graph
 * tool: the same data a flame graph shows, as text that can be committed. The .cpuprofile itself opens in Chrome
 * DevTools or speedscope for the picture.
 *
 * CLI: `node dist/bench/lib/profile-summary.js <file.cpuprofile> [topN]` prints the markdown.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
  readonly columnNumber: number;
}
interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
  readonly children?: number[];
}
interface CpuProfile {
  readonly nodes: ProfileNode[];
  readonly startTime: number;
  readonly endTime: number;
  readonly samples: number[];
  readonly timeDeltas: number[];
}

export interface ProfileSummary {
  readonly totalMs: number;
  readonly busyMs: number;
  readonly self: Array<{ name: string; where: string; ms: number; pct: number }>;
  readonly inclusive: Array<{ name: string; where: string; ms: number; pct: number }>;
  readonly areas: Array<{ area: string; ms: number; pct: number }>;
}

function shortUrl(url: string): string {
  if (!url) return '';
  const u = url.replace(/^file:\/\//, '');
  const nm = u.lastIndexOf('node_modules/');
  if (nm >= 0) return u.slice(nm + 'node_modules/'.length);
  const d = u.indexOf('/dist/');
  if (d >= 0) return u.slice(d + "/dist/".length);
  return u;
}

/** Where a frame belongs: `services/<folder>`, `npm:<package>`, `node:internal`, or a V8 pseudo-frame. */
export function areaOf(frame: CallFrame): string {
  const name = frame.functionName;
  if (name === '(garbage collector)') return 'GC';
  if (name === '(idle)') return 'idle';
  if (name === '(program)') return 'V8/native (program)';
  if (name === '(root)') return 'root';
  const url = frame.url.replace(/^file:\/\//, '');
  if (!url) return name.startsWith('(') ? name : 'V8 builtins/native';
  if (url.startsWith('wasm://')) return 'WebAssembly';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return `npm:${rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]}`;
  }
  if (url.startsWith('node:')) return 'node internals';
  const d = url.indexOf('/dist/');
  if (d >= 0) {
    const parts = url.slice(d + '/dist/'.length).split('/');
    return parts.length > 2 ? `${parts[0]}/${parts[1]}` : parts[0]!;
  }
  return url;
}

export function summarise(profile: CpuProfile, topN = 25): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const selfUs = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    // The delta after sample i is the time spent in it (V8 records the delta before; shift by one).
    const dt = profile.timeDeltas[i + 1] ?? 0;
    selfUs.set(id, (selfUs.get(id) ?? 0) + Math.max(0, dt));
  }
  const key = (f: CallFrame) => `${f.functionName || '(anonymous)'}\u0000${shortUrl(f.url)}${f.url ? `:${f.lineNumber + 1}` : ''}`;
  const selfByFn = new Map<string, number>();
  const inclByFn = new Map<string, number>();
  const areas = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (const [id, us] of selfUs) {
    const node = byId.get(id)!;
    total += us;
    const area = areaOf(node.callFrame);
    if (area === 'idle') idle += us;
    areas.set(area, (areas.get(area) ?? 0) + us);
    selfByFn.set(key(node.callFrame), (selfByFn.get(key(node.callFrame)) ?? 0) + us);
    // Inclusive: every distinct function on the stack gets the sample once.
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const k = key(byId.get(cur)!.callFrame);
      if (seen.has(k)) continue;
      seen.add(k);
      inclByFn.set(k, (inclByFn.get(k) ?? 0) + us);
    }
  }
  const busy = total - idle;
  const pct = (us: number) => Math.round((1000 * us) / (busy || 1)) / 10;
  const rows = (m: Map<string, number>, skip: (name: string) => boolean) =>
    [...m]
      .filter(([k]) => !skip(k.split('\u0000')[0]!))
      .sort((a, b) => b[1] - a[1])
      .slice(0, topN)
      .map(([k, us]) => {
        const [name, where] = k.split('\u0000');
        return { name: name!, where: where!, ms: Math.round(us / 100) / 10, pct: pct(us) };
      });
  return {
    totalMs: Math.round(total / 1000),
    busyMs: Math.round(busy / 1000),
    self: rows(selfByFn, (n) => n === '(idle)'),
    inclusive: rows(inclByFn, (n) => n === '(root)' || n === '(idle)' || n === '(program)' || n === '(garbage collector)'),
    areas: [...areas]
      .filter(([a]) => a !== 'idle' && a !== 'root')
      .sort((a, b) => b[1] - a[1])
      .map(([area, us]) => ({ area, ms: Math.round(us / 1000), pct: pct(us) })),
  };
}

export function toMarkdown(s: ProfileSummary, title: string): string {
  const esc = (v: string) => v.replace(/\|/g, '\\|');
  const lines = [
    `## ${title}`,
    '',
    `Sampled ${s.totalMs} ms, of which ${s.busyMs} ms busy (not idle); percentages are of busy time.`,
    '',
    '### Self time by area',
    '',
    '| area | ms | % |',
    '|---|---|---|',
    ...s.areas.slice(0, 20).map((a) => `| ${esc(a.area)} | ${a.ms} | ${a.pct} |`),
    '',
    '### Top functions by self time',
    '',
    '| function | where | self ms | % |',
    '|---|---|---|---|',
    ...s.self.map((r) => `| ${esc(r.name)} | ${esc(r.where)} | ${r.ms} | ${r.pct} |`),
    '',
    '### Top functions by inclusive time',
    '',
    '| function | where | total ms | % |',
    '|---|---|---|---|',
    ...s.inclusive.map((r) => `| ${esc(r.name)} | ${esc(r.where)} | ${r.ms} | ${r.pct} |`),
    '',
  ];
  return lines.join('\n');
}

export function summariseFile(file: string, title: string, topN = 25): { summary: ProfileSummary; markdown: string } {
  const summary = summarise(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, topN);
  return { summary, markdown: toMarkdown(summary, title) };
}

/** node's name for a thread's profile: CPU.<date>.<time>.<pid>.<thread id>.<seq>.cpuprofile (0: the main thread). */
function threadOf(file: string): number {
  const parts = file.split('.');
  return Number(parts.at(-3));
}

/**
 * One process's profiles, a file per thread (`--cpu-prof` without a name), as one page: the main thread first, then
 * the others, the one running WebAssembly named as the embedded store's (PGlite).
 */
export function summariseThreads(files: readonly string[], title: string, topN = 25): string {
  const threads = [...files].sort((a, b) => threadOf(a) - threadOf(b));
  const pages = threads.map((file) => {
    const summary = summarise(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, topN);
    const tid = threadOf(file);
    const which =
      tid === 0
        ? 'the main thread'
        : summary.areas.some((a) => a.area === 'WebAssembly')
          ? "the embedded store's thread (PGlite: Postgres compiled to WebAssembly)"
          : `worker thread ${tid}`;
    return toMarkdown(summary, `${title}: ${which}`);
  });
  return pages.join('\n');
}

if (process.argv[1]?.endsWith('profile-summary.js')) {
  const usage = 'usage: node dist/bench/lib/profile-summary.js <file.cpuprofile> [topN]';
  let positionals: string[] = [];
  try {
    positionals = parseArgs({ allowPositionals: true, strict: true }).positionals;
  } catch (err) {
    positionals = [];
    process.stderr.write(`${(err as Error).message}\n`);
  }
  const [file, top = '25'] = positionals;
  const topN = Number(top);
  if (!file || positionals.length > 2 || !Number.isInteger(topN) || topN < 1) {
    process.stderr.write(`${usage}\n`);
    process.exit(2);
  }
  process.stdout.write(summariseFile(file, file, topN).markdown);
}
