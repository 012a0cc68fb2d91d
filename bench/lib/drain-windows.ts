/**
 * Windows of a drain (bench/pipeline-drain.ts): from samples of the committed-output count and the CPU seconds of
 * each process group, the rate and CPU per record between two samples, and per tenth of the expected output.
 */
import { round } from './results.js';

export type Cpu = Record<string, number>;

export interface Sample {
  /** Epoch ms. */
  readonly t: number;
  /** Outputs committed so far. */
  readonly n: number;
  /** CPU seconds so far, by process group. */
  readonly cpu: Cpu;
}

export interface Window {
  readonly records: number;
  readonly sec: number;
  readonly recordsPerSec: number;
  /** CPU µs per record by group, and `total` over the `counted` groups. */
  readonly cpuUsPerRecord: Record<string, number>;
}

export function window(a: Sample, b: Sample, records: number, counted: readonly string[]): Window {
  const sec = (b.t - a.t) / 1000;
  const per: Record<string, number> = {};
  let total = 0;
  for (const k of Object.keys(b.cpu)) {
    const us = (((b.cpu[k] ?? 0) - (a.cpu[k] ?? 0)) * 1e6) / Math.max(1, records);
    per[k] = round(us, 1);
    if (counted.includes(k)) total += us;
  }
  per.total = round(total, 1);
  return { records, sec: round(sec, 2), recordsPerSec: sec > 0 ? Math.round(records / sec) : 0, cpuUsPerRecord: per };
}

/**
 * Tenth k ends at the first sample whose count reaches k/10 of `expected` and starts where tenth k−1 ended; the
 * first starts at the last sample before any output, so start-up before the first output stays out. A drain cut
 * off early has fewer than ten; samples must be in time order.
 */
export function tenthWindows(samples: readonly Sample[], expected: number, counted: readonly string[]): Window[] {
  const first = samples.findIndex((x) => x.n > 0);
  const out: Window[] = [];
  if (first <= 0 || expected <= 0) return out;
  let from = first - 1;
  for (let k = 1; k <= 10; k++) {
    const goal = Math.ceil((k * expected) / 10);
    const i = samples.findIndex((x, j) => j > from && x.n >= goal);
    if (i < 0) break;
    out.push(window(samples[from]!, samples[i]!, samples[i]!.n - samples[from]!.n, counted));
    from = i;
  }
  return out;
}
