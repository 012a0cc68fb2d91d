/**
 * One profiled process's CPU profiles, a file per thread (`--cpu-prof` without a name: with one name every thread
 * would write the same file), in bench/profiles/raw/<name>, summarised as one page, bench/profiles/<name>.md.
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { summariseThreads } from './profile-summary.js';
import { PROFILES_DIR } from './results.js';

/** The role whose process a profiled pipeline or drain profiles when it runs a process per role: enrich by default. */
export const profiledRole = (): string => process.env.BENCH_PROFILE_ROLE ?? 'enrich';

/** An empty directory for the profiles of `name`, and the node flags that write them there. */
export function freshProfileDir(name: string): { readonly dir: string; readonly nodeArgs: readonly string[] } {
  const dir = join(PROFILES_DIR, 'raw', name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return { dir, nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${dir}`] };
}

/** The page of the profiles in `dir` (once the process ended), written as bench/profiles/<name>.md; returns it. */
export function writeProfilePage(name: string, dir: string, title: string, log: (line: string) => void): string {
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  const markdown = summariseThreads(files.map((f) => join(dir, f)), title);
  writeFileSync(join(PROFILES_DIR, `${name}.md`), markdown);
  log(`  profile: bench/profiles/${name}.md (raw: ${dir}, ${files.length} threads)`);
  return markdown;
}
