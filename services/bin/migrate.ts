/** `DATABASE_URL=postgres://… node dist/services/bin/migrate.js`: applies pending migrations. */
import { loadConfig } from '../shared/config.js';
import { migrate, MigrationChangedError } from '../shared/db/migrate.js';
import { openPostgres } from '../shared/db/postgres.js';
import { openPglite } from '../shared/db/pglite.js';
import { join } from 'node:path';
import { takeNoArguments } from './cli/args.js';

takeNoArguments('usage: [DATABASE_URL=postgres://…] node dist/services/bin/migrate.js   (without DATABASE_URL: the embedded store in DATA_DIR)');

const config = loadConfig();
const db = config.databaseUrl ? await openPostgres(config.databaseUrl) : await openPglite(join(config.dataDir, 'db'));
try {
  const applied = await migrate(db);
  process.stdout.write(`migrations applied: ${applied.length ? applied.join(', ') : 'none pending'}\n`);
} catch (err) {
  if (!(err instanceof MigrationChangedError)) throw err;
  process.stderr.write(`${err.message}\n`);
  process.exitCode = 1;
} finally {
  await db.close();
}
