import pg from 'pg';
import type { Db, QueryResult, Sql } from './db.js';

export async function openPostgres(url: string, opts: { max?: number } = {}): Promise<Db> {
  const pool = new pg.Pool({ connectionString: url, max: opts.max ?? 10 });
  // A pool error (server restart) must not crash the process; the next query reconnects.
  pool.on('error', () => undefined);
  await pool.query('select 1');
  const wrap = (c: { query: pg.Pool['query'] }): Sql => ({
    async query<R>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
      const r = await c.query(text, params as unknown[] | undefined);
      return { rows: r.rows as R[], affectedRows: r.rowCount ?? undefined };
    },
  });
  const base = wrap(pool);
  return {
    kind: 'postgres',
    query: base.query,
    async transaction(fn) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const out = await fn(wrap(client));
        await client.query('COMMIT');
        return out;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    },
    close: () => pool.end(),
  };
}
