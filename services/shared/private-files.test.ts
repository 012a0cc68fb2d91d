/** Nothing under DATA_DIR is readable or writable by other users: made so on open, repaired when found otherwise. */
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, lstatSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase } from './db/open.js';
import { keepPrivate } from './private-files.js';

/** Every path under dir (dir included) whose mode gives group or others any access. */
function shared(dir: string): string[] {
  const out: string[] = [];
  const visit = (p: string): void => {
    const st = lstatSync(p);
    if (st.isSymbolicLink()) return;
    if ((st.mode & 0o077) !== 0) out.push(`${(st.mode & 0o777).toString(8)} ${p}`);
    if (st.isDirectory()) for (const n of readdirSync(p)) visit(join(p, n));
  };
  visit(dir);
  return out;
}

describe('DATA_DIR file modes', () => {
  it('the embedded store opens with every file and directory private to the owner, whatever PGlite wrote', async () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'private-')), 'data');
    const db = await openDatabase({ dataDir: dir });
    try {
      await db.query(`INSERT INTO workspaces (id, name, plan) VALUES ('ws_p', 'p', 'free')`);
    } finally {
      await db.close();
    }
    expect(lstatSync(dir).mode & 0o777).toBe(0o700);
    expect(readdirSync(join(dir, 'db')).length).toBeGreaterThan(10);
    expect(shared(dir)).toEqual([]);
  });

  it('a store left world-accessible is repaired at the next open, and its data is intact', async () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'private-')), 'data');
    const first = await openDatabase({ dataDir: dir });
    await first.query(`INSERT INTO workspaces (id, name, plan) VALUES ('ws_r', 'r', 'free')`);
    await first.close();
    chmodSync(dir, 0o777);
    chmodSync(join(dir, 'db'), 0o777);
    for (const n of readdirSync(join(dir, 'db'))) if (lstatSync(join(dir, 'db', n)).isFile()) chmodSync(join(dir, 'db', n), 0o666);
    expect(shared(dir).length).toBeGreaterThan(2);

    const warnings: unknown[] = [];
    const logger = { warn: (obj: unknown) => warnings.push(obj) } as never;
    const again = await openDatabase({ dataDir: dir, logger });
    try {
      expect((await again.query<{ name: string }>(`SELECT name FROM workspaces WHERE id = 'ws_r'`)).rows).toEqual([{ name: 'r' }]);
    } finally {
      await again.close();
    }
    expect(shared(dir)).toEqual([]);
    expect(warnings).toEqual([expect.objectContaining({ data_dir: dir, repaired: expect.any(Number) })]);
  });

  describe('keepPrivate', () => {
    it.each([
      { name: 'a file 0666', mode: 0o666, after: 0o600 },
      { name: 'a file 0644', mode: 0o644, after: 0o600 },
      { name: 'a file 0755', mode: 0o755, after: 0o700 },
      { name: 'a file already 0600', mode: 0o600, after: 0o600 },
    ])('$name becomes $after', ({ mode, after }) => {
      const dir = mkdtempSync(join(tmpdir(), 'private-'));
      mkdirSync(join(dir, 'sub'));
      writeFileSync(join(dir, 'sub', 'f'), 'x');
      chmodSync(join(dir, 'sub', 'f'), mode);
      keepPrivate(dir);
      expect(lstatSync(join(dir, 'sub', 'f')).mode & 0o777).toBe(after);
      expect(lstatSync(join(dir, 'sub')).mode & 0o777).toBe(0o700);
    });

    it('creates a missing DATA_DIR 0700', () => {
      const dir = join(mkdtempSync(join(tmpdir(), 'private-')), 'a', 'b');
      expect(keepPrivate(dir)).toEqual({ repaired: 0 });
      expect(lstatSync(dir).mode & 0o777).toBe(0o700);
    });

    describe('bad input', () => {
      it('a path that is a file where DATA_DIR should be a directory fails the start', () => {
        const base = mkdtempSync(join(tmpdir(), 'private-'));
        writeFileSync(join(base, 'data'), 'not a directory');
        expect(() => keepPrivate(join(base, 'data', 'db'))).toThrow();
      });
    });
  });
});
