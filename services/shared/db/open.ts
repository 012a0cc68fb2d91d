import { join } from 'node:path';
import type { Logger } from '../logger.js';
import { keepPrivate } from '../private-files.js';
import type { Db } from './db.js';
import { migrate } from './migrate.js';
import { openPglite } from './pglite.js';
import { openPostgres } from './postgres.js';

/**
 * DATABASE_URL set: Postgres; else the embedded store in DATA_DIR/db. Always migrated on open. The embedded store's
 * DATA_DIR is made private (owner only) before it is opened and again once PGlite has written its files.
 */
export async function openDatabase(opts: { databaseUrl?: string; dataDir?: string; inMemory?: boolean; logger?: Logger }): Promise<Db> {
  if (opts.databaseUrl) return migrated(await openPostgres(opts.databaseUrl));
  if (opts.inMemory) return migrated(await openPglite(undefined));
  const dataDir = opts.dataDir ?? './data';
  const before = keepPrivate(dataDir);
  if (before.repaired > 0) {
    opts.logger?.warn({ data_dir: dataDir, repaired: before.repaired }, 'DATA_DIR held files other users could read or change: made them private to the owner');
  }
  const db = await migrated(await openPglite(join(dataDir, 'db')));
  keepPrivate(dataDir);
  return db;
}

/** The store with its migrations applied; closed again when they cannot be (an edited applied file, a failing one). */
async function migrated(db: Db): Promise<Db> {
  try {
    await migrate(db);
    return db;
  } catch (err) {
    await db.close().catch(() => undefined);
    throw err;
  }
}
