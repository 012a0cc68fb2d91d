/**
 * Statements with parameters run as named prepared statements on both stores (services/shared/db/prepared-statements.ts):
 * the cases both answer the same way, run by each store's own test file (PGlite beside the code, Postgres in
 * test/integration). Each store's file adds what only it does.
 */
import { expect, it } from 'vitest';
import type { Db } from '../../services/shared/db/db.js';

/** `db()`: the store, with table prepared_t (a int PRIMARY KEY, b text) holding (1, 'one') and (2, 'two'). */
export function preparedStatementCases(db: () => Db): void {
  const SELECT = 'SELECT a, b FROM prepared_t WHERE a = ANY($1::int[]) ORDER BY a';

  it('prepares a statement with parameters once, and answers as an unnamed one would', async () => {
    const prepared = await db().transaction(async (sql) => {
      for (let i = 0; i < 3; i++) expect((await sql.query(SELECT, [[1, 2]])).rows).toEqual([{ a: 1, b: 'one' }, { a: 2, b: 'two' }]);
      // Without parameters: unnamed, so this lists what the connection has prepared.
      return (await sql.query<{ statement: string }>('SELECT statement FROM pg_prepared_statements')).rows.map((r) => r.statement);
    });
    expect(prepared.filter((s) => s === SELECT)).toHaveLength(1);
  });

  it('bad input: a statement that fails to parse fails again the same way, and the store goes on', async () => {
    const broken = 'SELEC a FROM prepared_t WHERE a = $1';
    for (let i = 0; i < 2; i++) await expect(db().transaction((sql) => sql.query(broken, [1]))).rejects.toThrow(/syntax error/);
    await expect(db().query('SELECT a FROM prepared_t WHERE a = $1', ['not a number'])).rejects.toThrow(/invalid input syntax/);
    expect((await db().query(SELECT, [[2]])).rows).toEqual([{ a: 2, b: 'two' }]);
  });

  it('a statement that failed to prepare (its table missing) runs once the table is there', async () => {
    const later = 'SELECT a FROM prepared_later WHERE a = $1';
    await expect(db().query(later, [1])).rejects.toThrow(/prepared_later/);
    await db().query('CREATE TABLE prepared_later (a int PRIMARY KEY)');
    await db().query('INSERT INTO prepared_later VALUES (1)');
    for (let i = 0; i < 2; i++) expect((await db().query(later, [1])).rows).toEqual([{ a: 1 }]);
  });

  it('a statement prepared in a transaction that rolled back still runs', async () => {
    const insert = 'INSERT INTO prepared_t (a, b) VALUES ($1, $2)';
    await expect(
      db().transaction(async (sql) => {
        await sql.query(insert, [10, 'ten']);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    await db().transaction((sql) => sql.query(insert, [11, 'eleven']));
    expect((await db().query(SELECT, [[10, 11]])).rows).toEqual([{ a: 11, b: 'eleven' }]);
  });
}
