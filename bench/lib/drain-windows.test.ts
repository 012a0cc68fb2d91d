import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tenthWindows, window, type Sample } from './drain-windows.js';
import { bodyPeople, makeBodies, repeatedKey } from './events.js';
import { pidFromFile, postgresCpuReader, processCpuSec } from './proc-cpu.js';

/** A drain of `perSample` outputs every 100 ms after `idle` empty samples; group `a` spends 1 ms per output, `b` 2 ms. */
function drain(total: number, perSample: number, idle = 3): Sample[] {
  const out: Sample[] = [];
  let n = 0;
  for (let i = 0; n < total; i++) {
    if (i >= idle) n = Math.min(total, n + perSample);
    out.push({ t: 1_000_000 + i * 100, n, cpu: { a: n * 0.001 + i * 0.01, b: n * 0.002 } });
  }
  return out;
}

describe('drain windows', () => {
  it.each([
    ['even drain', 1000, 50],
    ['samples that overshoot each tenth', 1000, 7],
    ['expected not a multiple of ten', 995, 25],
  ])('%s: ten tenths covering every output', (_name, expected, perSample) => {
    const w = tenthWindows(drain(expected, perSample), expected, ['a', 'b']);
    expect(w).toHaveLength(10);
    expect(w.reduce((s, x) => s + x.records, 0)).toBe(expected);
    // A tenth ends at the first sample past its share, so it is off by less than one sample's outputs.
    for (const x of w) expect(Math.abs(x.records - expected / 10)).toBeLessThan(perSample);
    // b costs exactly 2 ms per output in every window: start-up (the idle samples' cost of a) stays out of tenth 1.
    for (const x of w) expect(x.cpuUsPerRecord.b).toBeCloseTo(2000, 0);
  });

  it('a window counts only the named groups in total, per record', () => {
    const a: Sample = { t: 0, n: 0, cpu: { x: 1, y: 5, broker: 0 } };
    const b: Sample = { t: 2000, n: 100, cpu: { x: 1.1, y: 5.2, broker: 3 } };
    expect(window(a, b, 100, ['x', 'y'])).toEqual({ records: 100, sec: 2, recordsPerSec: 50, cpuUsPerRecord: { x: 1000, y: 2000, broker: 30000, total: 3000 } });
  });

  it.each([
    ['no samples', [] as Sample[], 100, 0],
    ['no output at all', drain(0, 10), 100, 0],
    ['output in the very first sample (no sample before it)', [{ t: 0, n: 10, cpu: {} }, { t: 100, n: 20, cpu: {} }], 20, 0],
    ['cut off at 35%', drain(350, 50), 1000, 3],
    ['expected of zero', drain(100, 10), 0, 0],
  ])('bad or partial input: %s', (_name, samples, expected, tenths) => {
    expect(tenthWindows(samples, expected, ['a'])).toHaveLength(tenths);
  });
});

describe('drain preload: repeated keys and people', () => {
  it.each([
    [0.05, 0.04, 0.06],
    [0.5, 0.47, 0.53],
  ])('about %s of events past the first request repeat a key', (share, lo, hi) => {
    let repeats = 0;
    const n = 200 * 100;
    for (let q = 1; q <= 200; q++) for (let i = 0; i < 100; i++) if (repeatedKey(q, i, share)) repeats++;
    expect(repeats / n).toBeGreaterThan(lo);
    expect(repeats / n).toBeLessThan(hi);
  });

  it.each([
    ['the first request', 0, 3, 0.5],
    ['a share of zero', 5, 3, 0],
    ['a negative share', 5, 3, -1],
  ])('no repeat for %s', (_name, q, i, share) => {
    expect(repeatedKey(q, i, share)).toBe(false);
  });

  it('bodies draw their identifiers from bodyPeople of the same seed and size', () => {
    const people = bodyPeople(11, 2000);
    const users = new Set(people.map((p) => p.user));
    const events = JSON.parse(makeBodies(1, { events: 200, conversionsOnly: true, people: 2000 }, 11)[0]!) as Array<{ event_metadata: { identifiers: { user?: string } } }>;
    const seen = events.map((e) => e.event_metadata.identifiers.user).filter((u): u is string => u !== undefined);
    expect(seen.length).toBeGreaterThan(50);
    for (const u of seen) expect(users.has(u)).toBe(true);
    expect(new Set(seen).size).toBeGreaterThan(seen.length / 2);
  });
});

describe('CPU from /proc', () => {
  it('reads this process, and 0 for a process that is gone', () => {
    const t = Date.now();
    while (Date.now() - t < 60);
    expect(processCpuSec(process.pid)).toBeGreaterThan(0);
    expect(processCpuSec(process.pid, true)).toBeGreaterThanOrEqual(processCpuSec(process.pid));
    expect(processCpuSec(2 ** 22 + 1)).toBe(0);
  });

  it.each([
    ['a pid and more lines', `${process.pid}\n/var/lib/pg\n`, process.pid],
    ['an empty file', '', undefined],
    ['text', 'postgres\n', undefined],
    ['a negative number', '-5\n', undefined],
  ])('pid file with %s', (_name, text, pid) => {
    const file = join(mkdtempSync(join(tmpdir(), 'pidfile-')), 'x.pid');
    writeFileSync(file, text);
    expect(pidFromFile(file)).toBe(pid);
  });

  it('a missing pid file is no pid; a reader without a postmaster still reads (the postgres-named processes)', () => {
    expect(pidFromFile('/nonexistent/x.pid')).toBeUndefined();
    expect(postgresCpuReader(undefined)()).toBeGreaterThanOrEqual(0);
    // This process as the "postmaster": its own time counts even with no children.
    expect(postgresCpuReader(process.pid)()).toBeGreaterThan(0);
  });
});
