/** The migration runner on Postgres; services/shared/db/migrate.test.ts runs the same cases on the embedded store. */
import { openPostgres } from '../../services/shared/db/postgres.js';
import type { Db } from '../../services/shared/db/db.js';
import { freshDatabase, infraEnv } from '../helpers/infra.js';
import { migrationCases } from '../helpers/migration-cases.js';

migrationCases({
  async open() {
    const database = await freshDatabase(infraEnv().DATABASE_URL, { migrated: false });
    const others: Db[] = [];
    return {
      db: database.db,
      // Another replica: a pool of its own on the same database.
      async second() {
        const other = await openPostgres(database.url);
        others.push(other);
        return other;
      },
      async drop() {
        for (const o of others) await o.close();
        await database.drop();
      },
    };
  },
});
