/**
 * Statements with parameters run as named prepared statements on Postgres (services/shared/db/postgres.ts): parsed
 * once per connection, answering the same as unnamed ones through a table's DDL, a failed statement and a rollback
 * (the cases PGlite shares in test/helpers/prepared-cases.ts, and those of Postgres's connections).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../services/shared/db/db.js';
import { openPostgres } from '../../services/shared/db/postgres.js';
import { freshDatabase, infraEnv } from '../helpers/infra.js';
import { preparedStatementCases } from '../helpers/prepared-cases.js';

let database: { url: string; db: Db; drop(): Promise<void> };
let db: Db;

beforeAll(async () => {
  database = await freshDatabase(infraEnv().DATABASE_URL, { migrated: false });
  db = database.db;
  await db.query('CREATE TABLE prepared_t (a int PRIMARY KEY, b text)');
  await db.query("INSERT INTO prepared_t VALUES (1, 'one'), (2, 'two')");
});

afterAll(async () => {
  await database?.drop();
});

const SELECT = 'SELECT a, b FROM prepared_t WHERE a = ANY($1::int[]) ORDER BY a';

describe('prepared statements on Postgres', () => {
  preparedStatementCases(() => db);

  it('answers through DDL on the table it reads: a column added, the table dropped and created again', async () => {
    await db.transaction(async (sql) => {
      expect((await sql.query(SELECT, [[2]])).rows).toEqual([{ a: 2, b: 'two' }]);
      await sql.query('ALTER TABLE prepared_t ADD COLUMN c text');
      expect((await sql.query(SELECT, [[2]])).rows).toEqual([{ a: 2, b: 'two' }]);
      await sql.query('DROP TABLE prepared_t');
      await sql.query('CREATE TABLE prepared_t (a int PRIMARY KEY, b text)');
      await sql.query("INSERT INTO prepared_t VALUES (2, 'deux')");
      expect((await sql.query(SELECT, [[2]])).rows).toEqual([{ a: 2, b: 'deux' }]);
    });
  });

  it("a `SELECT *` prepared before another replica's migration added a column answers with it, not an error", async () => {
    // One connection, so the second call meets the statement prepared by the first.
    const replica = await openPostgres(database.url, { max: 1 });
    try {
      await db.query('CREATE TABLE prepared_star (a int PRIMARY KEY, b text)');
      await db.query("INSERT INTO prepared_star VALUES (1, 'one')");
      const star = 'SELECT * FROM prepared_star WHERE a = $1';
      expect((await replica.query(star, [1])).rows).toEqual([{ a: 1, b: 'one' }]);
      // The other replica's migration, on a connection of its own.
      await db.query("ALTER TABLE prepared_star ADD COLUMN c text DEFAULT 'new'");
      expect((await replica.query(star, [1])).rows).toEqual([{ a: 1, b: 'one', c: 'new' }]);
      expect((await replica.query(star, [1])).rows).toEqual([{ a: 1, b: 'one', c: 'new' }]);
    } finally {
      await replica.close();
    }
  });
});
