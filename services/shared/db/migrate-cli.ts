/** `DATABASE_URL=postgres://… node dist/services/shared/db/migrate-cli.js`: applies pending migrations. */
import { loadConfig } from '../config.js';
import { migrate } from './migrate.js';
import { openPostgres } from './postgres.js';
import { openPglite } from './pglite.js';
import { join } from 'node:path';

const config = loadConfig();
const db = config.databaseUrl ? await openPostgres(config.databaseUrl) : await openPglite(join(config.dataDir, 'db'));
const applied = await migrate(db);
process.stdout.write(`migrations applied: ${applied.length ? applied.join(', ') : 'none pending'}\n`);
await db.close();
