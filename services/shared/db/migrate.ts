/**
 * Applies services/shared/db/migrations/NNNN_name.sql in order, each in its own transaction, recording them in
 * schema_migrations. An advisory lock makes concurrent replicas wait for one another instead of racing.
 * NOTE: no migration library runs on both PGlite and pg; this is the smallest runner that does (docs/decisions.md).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../repo-root.js';
import type { Db } from './db.js';

const MIGRATION_LOCK = 7_312_001;

export function migrationsDir(): string {
  // The .sql files stay in the source tree; this works from services/ (tests) and dist/services/ (built).
  return join(repoRoot(), 'services', 'shared', 'db', 'migrations');
}

export async function migrate(db: Db): Promise<string[]> {
  const files = readdirSync(migrationsDir())
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort();
  const applied: string[] = [];
  await db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await tx.query(
      'CREATE TABLE IF NOT EXISTS schema_migrations (id text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
    );
    const done = new Set((await tx.query<{ id: string }>('SELECT id FROM schema_migrations')).rows.map((r) => r.id));
    for (const file of files) {
      if (done.has(file)) continue;
      const sql = readFileSync(join(migrationsDir(), file), 'utf8');
      for (const statement of splitStatements(sql)) await tx.query(statement);
      await tx.query('INSERT INTO schema_migrations (id) VALUES ($1)', [file]);
      applied.push(file);
    }
  });
  return applied;
}

/** Splits on semicolons at line ends; migrations keep one statement per `;`-terminated block (no functions). */
function splitStatements(sql: string): string[] {
  return sql
    .split(/;\s*$/m)
    .map((s) => s.replace(/^\s*--.*$/gm, '').trim())
    .filter((s) => s.length > 0);
}
