import pg from 'pg';
import type { Db, QueryResult, Tx } from './db.js';
import { planResultChanged, StatementNames } from './prepared-statements.js';

export async function openPostgres(url: string, opts: { max?: number } = {}): Promise<Db> {
  // No JIT: the service's statements are short, and compiling one (10-20 ms, whenever the planner's estimate passes
  // jit_above_cost, as a correlated EXISTS over an unanalysed table does) costs more than any of them runs. An
  // `options` parameter in DATABASE_URL replaces this one.
  const pool = new pg.Pool({ connectionString: url, max: opts.max ?? 10, options: '-c jit=off' });
  // A pool error (server restart) must not crash the process; the next query reconnects.
  pool.on('error', () => undefined);
  await pool.query('select 1');
  const names = new StatementNames();
  // `retry`: outside a transaction a statement whose prepared plan went stale runs again, unnamed.
  const wrap = (c: { query: pg.Pool['query'] }, retry: boolean): Tx => ({
    async query<R>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
      const values = params as unknown[] | undefined;
      const name = values !== undefined && values.length > 0 ? names.of(text) : undefined;
      let r: pg.QueryResult;
      try {
        r = await c.query(name === undefined ? { text, values } : { name, text, values });
      } catch (err) {
        if (name === undefined || !planResultChanged(err)) throw err;
        names.forget(text);
        if (!retry) throw err;
        r = await c.query({ text, values });
      }
      return { rows: r.rows as R[], affectedRows: r.rowCount ?? undefined };
    },
    // Without parameters pg sends the simple query protocol, which takes several statements at once.
    async exec(script: string): Promise<void> {
      await c.query(script);
    },
  });
  const base = wrap(pool, true);
  return {
    kind: 'postgres',
    query: base.query,
    transaction: (fn) => lazyTransaction(pool, (client) => wrap(client, false), fn),
    close: () => pool.end(),
  };
}

/**
 * fn in one transaction that begins with fn's first statement: a batch that runs no SQL (dedupe's, most of the
 * Kafka runner's) takes no connection and costs the server nothing. COMMIT when fn resolves, ROLLBACK when it throws.
 */
async function lazyTransaction<T>(pool: pg.Pool, wrap: (c: pg.PoolClient) => Tx, fn: (tx: Tx) => Promise<T>): Promise<T> {
  let session: Promise<{ client: pg.PoolClient; tx: Tx }> | undefined;
  const open = (): Promise<{ client: pg.PoolClient; tx: Tx }> =>
    (session ??= (async () => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
      } catch (err) {
        client.release(err as Error);
        throw err;
      }
      return { client, tx: wrap(client) };
    })());
  const tx: Tx = {
    query: async (text, params) => (await open()).tx.query(text, params),
    exec: async (script) => (await open()).tx.exec(script),
  };
  let out: T;
  try {
    out = await fn(tx);
  } catch (err) {
    if (session) {
      const s = await session.catch(() => undefined);
      if (s) {
        await s.client.query('ROLLBACK').catch(() => undefined);
        s.client.release();
      }
    }
    throw err;
  }
  if (!session) return out;
  const { client } = await session;
  try {
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
  return out;
}
