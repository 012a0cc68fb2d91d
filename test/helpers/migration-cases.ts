/**
 * The migration runner's cases, run against each store by its own test file (PGlite beside the code, Postgres in
 * test/integration): a fresh database, one the earlier runner migrated, an edited applied file, two runs at once.
 * Each case migrates a copy of the service's migrations, so it can edit or add files without touching the real ones.
 */
import { appendFileSync, cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Db } from '../../services/shared/db/db.js';
import { checksumOf, migrate, MigrationChangedError, migrationFiles, migrationsDir } from '../../services/shared/db/migrate.js';

export interface MigrationStore {
  /** An empty database; `second` is how another replica reaches the same one; `drop` closes and removes both. */
  open(): Promise<{ db: Db; second(): Promise<Db>; drop(): Promise<void> }>;
}

interface Recorded {
  id: string;
  checksum: string | null;
  applied_at: unknown;
}

const recorded = async (db: Db): Promise<Recorded[]> =>
  (await db.query<Recorded>('SELECT id, checksum, applied_at FROM schema_migrations ORDER BY id')).rows;

/** What the earlier runner left: schema_migrations (id, applied_at) without checksums, and the first `count` files applied. */
async function migrateAsBefore(db: Db, dir: string, count: number): Promise<string[]> {
  const files = migrationFiles(dir).slice(0, count);
  await db.transaction(async (tx) => {
    await tx.query('CREATE TABLE schema_migrations (id text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
    for (const f of files) {
      await tx.exec(f.sql);
      await tx.query('INSERT INTO schema_migrations (id) VALUES ($1)', [f.name]);
    }
  });
  return files.map((f) => f.name);
}

export function migrationCases(store: MigrationStore): void {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  const setUp = async (): Promise<{ db: Db; dir: string; names: string[]; second(): Promise<Db> }> => {
    const dir = mkdtempSync(join(tmpdir(), 'migrations-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    cpSync(migrationsDir(), dir, { recursive: true });
    const opened = await store.open();
    cleanups.push(opened.drop);
    return { db: opened.db, dir, names: migrationFiles(dir).map((f) => f.name), second: opened.second };
  };

  describe('migrations', () => {
    it('migrates a fresh database in file order, records each file with its SHA-256, and finds nothing pending after', async () => {
      const { db, dir, names } = await setUp();
      expect(await migrate(db, { dir })).toEqual(names);
      const rows = await recorded(db);
      expect(rows.map((r) => [r.id, r.checksum])).toEqual(names.map((n) => [n, checksumOf(readFileSync(join(dir, n), 'utf8'))]));
      expect(await migrate(db, { dir })).toEqual([]);
      expect(await recorded(db)).toEqual(rows);
    });

    it('runs a file as a whole script: a function body with semicolons at line ends is one statement', async () => {
      const { db, dir, names } = await setUp();
      writeFileSync(
        join(dir, '9000_function.sql'),
        'CREATE FUNCTION twice(n int) RETURNS int AS $$\nBEGIN\n  RETURN n * 2;\nEND;\n$$ LANGUAGE plpgsql;\n\nSELECT twice(1);\n',
      );
      expect(await migrate(db, { dir })).toEqual([...names, '9000_function.sql']);
      expect((await db.query<{ v: number }>('SELECT twice(21) AS v')).rows).toEqual([{ v: 42 }]);
    });

    it('adopts a database the earlier runner migrated: nothing applied runs again, checksums are filled in, the rest applies', async () => {
      const { db, dir, names } = await setUp();
      const before = await migrateAsBefore(db, dir, 10);
      await db.query(`INSERT INTO workspaces (id, name, plan) VALUES ('ws_adopted', 'kept', 'free')`);
      const oldRows = (await db.query<Recorded>('SELECT id, applied_at FROM schema_migrations ORDER BY id')).rows;
      expect(oldRows.map((r) => r.id)).toEqual(before);

      // A file that ran again would fail: none of them creates its tables IF NOT EXISTS.
      expect(await migrate(db, { dir })).toEqual(names.slice(before.length));
      const rows = await recorded(db);
      expect(rows.map((r) => r.id)).toEqual(names);
      for (const row of rows) expect(row.checksum, row.id).toBe(checksumOf(readFileSync(join(dir, row.id), 'utf8')));
      expect(rows.slice(0, before.length).map((r) => r.applied_at)).toEqual(oldRows.map((r) => r.applied_at));
      expect((await db.query(`SELECT name FROM workspaces WHERE id = 'ws_adopted'`)).rows).toEqual([{ name: 'kept' }]);
      expect(await migrate(db, { dir })).toEqual([]);
    });

    it('refuses to start when an applied file has changed, naming it, and applies nothing of what is pending', async () => {
      const { db, dir, names } = await setUp();
      await migrate(db, { dir });
      const changed = names[1]!;
      appendFileSync(join(dir, changed), '\nALTER TABLE workspaces ADD COLUMN sneaked text;\n');
      writeFileSync(join(dir, '9001_pending.sql'), 'CREATE TABLE pending_one (id int);\n');

      const refused = migrate(db, { dir });
      await expect(refused).rejects.toBeInstanceOf(MigrationChangedError);
      await expect(refused).rejects.toMatchObject({ file: changed, message: expect.stringContaining(`migration ${changed} has changed`) });
      expect((await recorded(db)).map((r) => r.id)).toEqual(names);
      expect((await db.query(`SELECT to_regclass('pending_one') AS t`)).rows).toEqual([{ t: null }]);
    });

    it('takes a file whose only change is CRLF line ends as unchanged', async () => {
      const { db, dir, names } = await setUp();
      await migrate(db, { dir });
      const path = join(dir, names[0]!);
      writeFileSync(path, readFileSync(path, 'utf8').replace(/\n/g, '\r\n'));
      expect(await migrate(db, { dir })).toEqual([]);
    });

    it("0020: the log's and the stages' state values are json on the embedded store, and stay jsonb on Postgres", async () => {
      const { db, dir } = await setUp();
      await migrate(db, { dir });
      const types = await db.query<{ table_name: string; data_type: string }>(
        `SELECT table_name, data_type FROM information_schema.columns
         WHERE table_schema = current_schema() AND column_name = 'value' AND table_name IN ('log_records', 'state_store') ORDER BY table_name`,
      );
      const expected = db.kind === 'pglite' ? 'json' : 'jsonb';
      expect(types.rows).toEqual([
        { table_name: 'log_records', data_type: expected },
        { table_name: 'state_store', data_type: expected },
      ]);
    });

    it('lets two replicas migrate the same database at once: every file applied once, by one of them', async () => {
      const { db, dir, names, second } = await setUp();
      const other = await second();
      const [a, b] = await Promise.all([migrate(db, { dir }), migrate(other, { dir })]);
      expect([a, b].sort((x, y) => y.length - x.length)).toEqual([names, []]);
      expect((await recorded(db)).map((r) => r.id)).toEqual(names);
    });
  });
}
