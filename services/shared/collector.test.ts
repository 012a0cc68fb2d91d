import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { collectorFlags } from './collector.js';

describe('collectorFlags: scavenging on the main thread where the process may use one CPU', () => {
  it('turns the parallel scavenge off for one CPU, and leaves it on for more', () => {
    expect(collectorFlags(1, [])).toEqual(['--no-parallel-scavenge']);
    expect(collectorFlags(2, [])).toEqual([]);
    expect(collectorFlags(16, ['--max-old-space-size=4096'])).toEqual([]);
  });

  it("leaves an operator's own choice as given, in either spelling", () => {
    expect(collectorFlags(1, ['--parallel-scavenge'])).toEqual([]);
    expect(collectorFlags(1, ['--no-parallel-scavenge'])).toEqual([]);
    expect(collectorFlags(1, ['--parallel_scavenge'])).toEqual([]);
    expect(collectorFlags(1, ['--parallel-scavenge-task-trigger=80'])).toEqual(['--no-parallel-scavenge']);
  });
});

describe('the flag set at run time reaches the collector', () => {
  // A young generation with survivors, scavenged; --trace-gc-nvp reports the helper threads' share of each scavenge.
  const script = `
    import('./services/shared/collector.js').then(({ collectorFlags }) => {
      const v8 = require('node:v8');
      for (const f of collectorFlags(Number(process.argv[1]), [])) v8.setFlagsFromString(f);
      const keep = new Array(50000);
      for (let i = 0; i < 400000; i++) keep[i % keep.length] = { a: 'x'.repeat(40) + i };
    });`;
  const helperTimes = (cpus: number): number[] => {
    const run = spawnSync(process.execPath, ['--trace-gc-nvp', '-e', script, String(cpus)], { cwd: `${__dirname}/../../dist`, encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    return [...run.stdout.matchAll(/background\.scavenge\.parallel=([\d.]+)/g)].map((m) => Number(m[1]));
  };

  it('more CPUs: helper threads take part (what the test would see if the flag did not reach the collector)', () => {
    expect(helperTimes(2).some((t) => t > 0)).toBe(true);
  });

  it('one CPU: every scavenge without helper threads', () => {
    const times = helperTimes(1);
    expect(times.length).toBeGreaterThan(0);
    expect(times.every((t) => t === 0)).toBe(true);
  });
});
