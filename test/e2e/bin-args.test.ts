/**
 * The command-line tools that take no arguments (node dist/services/bin/{topics,migrate,openapi}.js, built first):
 * `--help` prints the usage and exits 0; anything else is refused with the usage and exit code 2 before any work.
 * The benchmark runner and the profile summariser refuse unknown names and flags the same way.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/service-process.js';

const run = (tool: string, args: string[], dir = join('services', 'bin')) =>
  spawnSync(process.execPath, [join(REPO_ROOT, 'dist', dir, `${tool}.js`), ...args], {
    env: { PATH: process.env.PATH, DATA_DIR: mkdtempSync(join(tmpdir(), 'bin-args-')) },
    encoding: 'utf8',
    timeout: 30_000,
  });

describe('tools without arguments', () => {
  it('topics.js prints one line per topic', () => {
    const r = run('topics', []);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^events\.raw \d+ /m);
  });

  it.each(['topics', 'migrate', 'openapi'])('%s.js --help prints its usage, exit 0', (tool) => {
    const r = run(tool, ['--help']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`usage: `);
    expect(r.stdout).toContain(`${tool}.js`);
  });

  describe('bad input', () => {
    it.each([
      ['topics', ['--bogus']],
      ['topics', ['events.raw']],
      ['migrate', ['--database-url', 'postgres://x']],
      ['migrate', ['now']],
      ['openapi', ['--out', 'x.json']],
    ])('%s.js %j: the usage, exit 2', (tool, args) => {
      const r = run(tool, args);
      expect(r.status, r.stdout).toBe(2);
      expect(r.stderr).toContain(`usage: `);
      expect(r.stdout).toBe('');
    });
  });
});

describe('benchmark tools (tsconfig.dev.json)', () => {
  it('run.js --help lists the benchmarks, exit 0', () => {
    const r = run('run', ['--help'], 'bench');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^names: .*gateway-embedded/m);
  });

  describe('bad input', () => {
    it.each([
      ['run', ['gateway-embeded'], 'bench'],
      ['run', ['--no-profiles'], 'bench'],
      ['profile-summary', [], join('bench', 'lib')],
      ['profile-summary', ['x.cpuprofile', 'ten'], join('bench', 'lib')],
      ['profile-summary', ['--top', '5', 'x.cpuprofile'], join('bench', 'lib')],
    ])('%s.js %j: the usage, exit 2, nothing run', (tool, args, dir) => {
      const r = run(tool, args, dir);
      expect(r.status, r.stdout).toBe(2);
      expect(r.stderr).toContain('usage: ');
      expect(r.stdout).toBe('');
    });
  });
});
