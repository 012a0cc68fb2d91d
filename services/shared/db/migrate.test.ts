/** The migration runner on the embedded store; test/integration/migrations.test.ts runs the same cases on Postgres. */
import { migrationCases } from '../../../test/helpers/migration-cases.js';
import { openPglite } from './pglite.js';

migrationCases({
  async open() {
    const db = await openPglite(undefined);
    // One process holds an embedded store: replicas starting together are two starts on the one handle.
    return { db, second: async () => db, drop: () => db.close() };
  },
});
