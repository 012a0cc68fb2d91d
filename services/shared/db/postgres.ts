import pg from 'pg';
import { inTransaction, type Db, type QueryResult, type Tx } from './db.js';

export async function openPostgres(url: string, opts: { max?: number } = {}): Promise<Db> {
  const pool = new pg.Pool({ connectionString: url, max: opts.max ?? 10 });
  // A pool error (server restart) must not crash the process; the next query reconnects.
  pool.on('error', () => undefined);
  await pool.query('select 1');
  const wrap = (c: { query: pg.Pool['query'] }): Tx => ({
    async query<R>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
      const r = await c.query(text, params as unknown[] | undefined);
      return { rows: r.rows as R[], affectedRows: r.rowCount ?? undefined };
    },
    // Without parameters pg sends the simple query protocol, which takes several statements at once.
    async exec(script: string): Promise<void> {
      await c.query(script);
    },
  });
  const base = wrap(pool);
  return {
    kind: 'postgres',
    query: base.query,
    async transaction(fn) {
      const client = await pool.connect();
      try {
        return await inTransaction(wrap(client), fn);
      } finally {
        client.release();
      }
    },
    close: () => pool.end(),
  };
}
