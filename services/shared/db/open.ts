import { join } from 'node:path';
import type { Db } from './db.js';
import { migrate } from './migrate.js';
import { openPglite } from './pglite.js';
import { openPostgres } from './postgres.js';

/** DATABASE_URL set: Postgres; else the embedded store in DATA_DIR/db. Always migrated on open. */
export async function openDatabase(opts: { databaseUrl?: string; dataDir?: string; inMemory?: boolean }): Promise<Db> {
  const db = opts.databaseUrl
    ? await openPostgres(opts.databaseUrl)
    : await openPglite(opts.inMemory ? undefined : join(opts.dataDir ?? './data', 'db'));
  await migrate(db);
  return db;
}
