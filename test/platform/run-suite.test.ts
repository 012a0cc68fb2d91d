/**
 * test/run-suite.sh, which `make test` runs: a file whose vitest worker died under it, when that is the run's only
 * failure, runs once more on its own and must pass there; a failed test fails the run without a second run.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/service-process.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function runSuite(env: Record<string, string>) {
  const dir = mkdtempSync(join(tmpdir(), 'run-suite-'));
  dirs.push(dir);
  const r = spawnSync('bash', [join(REPO_ROOT, 'test', 'run-suite.sh'), '--config', 'test/platform/run-suite/cases.config.ts'], {
    cwd: REPO_ROOT,
    env: { ...process.env, RUN_SUITE_CASE_DIR: dir, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status, out: `${r.stdout}${r.stderr}`, died: existsSync(join(dir, 'died')) };
}

describe('test/run-suite.sh', () => {
  it('runs a file whose worker died once more, alone, and passes when it does', () => {
    const r = runSuite({});
    expect(r.died).toBe(true);
    expect(r.out).toMatch(/Test files that did not finish[^\n]*\n\s+\S*dies-once\.case\.ts/);
    expect(r.out).toMatch(/run-suite: the only failure was a worker that died under \S*dies-once\.case\.ts;/);
    expect(r.code, r.out).toBe(0);
  });

  it('fails at once, without a second run, when a test failed too', () => {
    const r = runSuite({ RUN_SUITE_FAIL: '1' });
    expect(r.died).toBe(true);
    expect(r.out).not.toContain('run-suite: the only failure');
    expect(r.code).toBe(1);
  });
});
