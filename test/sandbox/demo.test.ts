/**
 * `make demo` as a newcomer runs it (node dist/test/sandbox/demo.js, built by make build-dev): it says it is a
 * throw-away instance, the conversions arrive, and its temporary data directory is gone afterwards.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/service-process.js';

const DEMO = join(REPO_ROOT, 'dist', 'test', 'sandbox', 'demo.js');

describe('make demo', () => {
  it('runs on a throw-away instance, shows the conversions arriving and deletes its data', { timeout: 90_000 }, async () => {
    if (!existsSync(DEMO)) throw new Error('build first: make build-dev (make test does)');
    const r = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
      execFile(process.execPath, [DEMO], { env: { PATH: process.env.PATH }, timeout: 80_000 }, (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      ),
    );
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(r.stdout).toMatch(/^A throw-away instance/);
    expect(r.stdout).toContain('Your `make run`, its ./data and its workspaces are not touched');
    expect(r.stdout).toContain('the platform received 2 conversions');
    const dataDir = /\(data in (\S+), deleted at the end\)/.exec(r.stdout)?.[1];
    expect(dataDir, r.stdout).toBeDefined();
    expect(existsSync(dataDir!)).toBe(false);
    expect(r.stdout).toContain('The demo instance is stopped and its data deleted');
  });
});
