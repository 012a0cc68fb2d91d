/**
 * The garbage collector's settings for the CPUs the process may run on, set at start (main.ts) before any work.
 *
 * V8 scavenges (collects the young generation) on the main thread and helper threads together. A process allowed
 * one CPU (its affinity: `taskset`, a cpuset, the benchmarks' layout) runs those helpers on that same CPU, where they
 * only take turns with the main thread and wait for one another: measured on the drain's enrich process, pinned to one
 * core, its scavenge pauses took 4.4–5.6 s against 3.3–4.2 s on the main thread alone, and its CPU per record
 * 245–304 µs against 206–231 (docs/decisions.md). So a process that may run on one CPU scavenges on its main thread.
 * An operator's own `--parallel-scavenge` / `--no-parallel-scavenge` on node's command line is left as given (Node
 * refuses both in NODE_OPTIONS).
 */
import { availableParallelism } from 'node:os';
import { setFlagsFromString } from 'node:v8';

/** The V8 flags for a process that may run on `cpus` CPUs, unless the operator chose (`given`: node's command-line options). */
export function collectorFlags(cpus: number, given: readonly string[]): string[] {
  if (given.some((arg) => /^--(no-)?parallel[-_]scavenge(=|$)/.test(arg))) return [];
  return cpus <= 1 ? ['--no-parallel-scavenge'] : [];
}

/** Sets the flags for this process (the CPUs it may use, its command line); answers what it set. */
export function tuneCollector(): string[] {
  const flags = collectorFlags(availableParallelism(), process.execArgv);
  for (const flag of flags) setFlagsFromString(flag);
  return flags;
}
