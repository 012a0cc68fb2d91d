/**
 * Applies services/shared/db/migrations/NNNN_name.sql in order with umzug, the same on Postgres and PGlite. Every
 * applied file is recorded in schema_migrations with the SHA-256 of its text; a recorded file whose text has changed
 * since is refused before anything runs. All of it happens in one transaction under an advisory lock, so replicas
 * that start together wait for one another and the first one's work is all or nothing.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Umzug, type UmzugStorage } from 'umzug';
import { repoRoot } from '../repo-root.js';
import type { Db, Tx } from './db.js';

const MIGRATION_LOCK = 7_312_001;
const MIGRATION_FILE = /^\d{4}_[a-z0-9_]+\.sql$/;

export function migrationsDir(): string {
  // The .sql files stay in the source tree; this works from services/ (tests) and dist/services/ (built).
  return join(repoRoot(), 'services', 'shared', 'db', 'migrations');
}

/** An applied migration's file no longer has the text it was applied with: the schema would not be what it says. */
export class MigrationChangedError extends Error {
  constructor(
    readonly file: string,
    readonly recorded: string,
    readonly current: string,
  ) {
    super(
      `migration ${file} has changed since it was applied (recorded sha256 ${recorded}, the file's now ${current}): ` +
        'an applied migration must stay as it was; put the change in a new migration file, or restore this one',
    );
    this.name = 'MigrationChangedError';
  }
}

export interface MigrationFile {
  readonly name: string;
  readonly sql: string;
  readonly checksum: string;
}

/** The migration files of `dir` in the order they apply, each with its checksum. */
export function migrationFiles(dir = migrationsDir()): MigrationFile[] {
  return readdirSync(dir)
    .filter((f) => MIGRATION_FILE.test(f))
    .sort()
    .map((name) => {
      const sql = readFileSync(join(dir, name), 'utf8');
      return { name, sql, checksum: checksumOf(sql) };
    });
}

/** SHA-256 of the text with line ends made LF: a checkout that turns them into CRLF changes no migration. */
export function checksumOf(sql: string): string {
  return createHash('sha256').update(sql.replace(/\r\n/g, '\n')).digest('hex');
}

/** Applies the pending migrations of `dir` (default: the service's); returns the names applied, in order. */
export async function migrate(db: Db, opts: { dir?: string } = {}): Promise<string[]> {
  const files = migrationFiles(opts.dir);
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await prepareBookkeeping(tx, files);
    const umzug = new Umzug<Tx>({
      migrations: files.map((f) => ({ name: f.name, up: ({ context }) => context.exec(f.sql) })),
      context: tx,
      storage: checksumStorage(files),
      logger: undefined,
    });
    return (await umzug.up()).map((m) => m.name);
  });
}

/**
 * Makes schema_migrations exist with its checksum column, and checks what it records against the files. A table the
 * earlier runner kept (names only) is adopted as it is: its rows are taken as applied and get the checksums of today's
 * files. A recorded name without a file (a newer database under an older release) is left alone, as before.
 */
async function prepareBookkeeping(tx: Tx, files: readonly MigrationFile[]): Promise<void> {
  await tx.query(
    'CREATE TABLE IF NOT EXISTS schema_migrations (id text PRIMARY KEY, checksum text, applied_at timestamptz NOT NULL DEFAULT now())',
  );
  const column = await tx.query(
    `SELECT 1 FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name = 'schema_migrations' AND column_name = 'checksum'`,
  );
  if (column.rows.length === 0) await tx.query('ALTER TABLE schema_migrations ADD COLUMN checksum text');
  const byName = new Map(files.map((f) => [f.name, f]));
  const recorded = await tx.query<{ id: string; checksum: string | null }>('SELECT id, checksum FROM schema_migrations ORDER BY id');
  for (const row of recorded.rows) {
    const file = byName.get(row.id);
    if (!file) continue;
    if (row.checksum === null) {
      await tx.query('UPDATE schema_migrations SET checksum = $2 WHERE id = $1', [row.id, file.checksum]);
    } else if (row.checksum !== file.checksum) {
      throw new MigrationChangedError(row.id, row.checksum, file.checksum);
    }
  }
}

/** umzug's record of what ran: schema_migrations, read and written in the migrating transaction. */
function checksumStorage(files: readonly MigrationFile[]): UmzugStorage<Tx> {
  const checksums = new Map(files.map((f) => [f.name, f.checksum]));
  return {
    async executed({ context }) {
      return (await context.query<{ id: string }>('SELECT id FROM schema_migrations ORDER BY id')).rows.map((r) => r.id);
    },
    async logMigration({ name, context }) {
      await context.query('INSERT INTO schema_migrations (id, checksum) VALUES ($1, $2)', [name, checksums.get(name)]);
    },
    async unlogMigration({ name, context }) {
      await context.query('DELETE FROM schema_migrations WHERE id = $1', [name]);
    },
  };
}
