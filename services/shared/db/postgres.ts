import pg from 'pg';
import type { Db, QueryResult, Tx } from './db.js';

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
 * Names for the statements that take parameters, so that each connection parses and plans a statement once and then
 * only binds and executes it (pg's named prepared statements). Postgres spent 300 µs of CPU parsing and planning the
 * forwarder's readiness query at every call, 40 µs executing it prepared; the stages' batch statements are parsed
 * and planned at every chunk the same way (docs/decisions.md). A statement's name follows from its text, the same on
 * every connection of the process. At most MAX_NAMED texts get a name: statements whose text is built from varying
 * parts (the delivery log's filters) cannot grow the connections' caches without bound; beyond it they run unnamed
 * as before. Postgres replans a prepared statement by itself when a table it reads changes (DDL), but refuses to
 * when the change alters the statement's result columns (`SELECT *` of a table another replica's migration added a
 * column to): such a text runs unnamed from then on (`forget`).
 */
export class StatementNames {
  static readonly MAX_NAMED = 256;
  /** A text's name, or null once forgotten (it runs unnamed). */
  private readonly names = new Map<string, string | null>();

  of(text: string): string | undefined {
    let name = this.names.get(text);
    if (name === undefined && this.names.size < StatementNames.MAX_NAMED) this.names.set(text, (name = `s${this.names.size}`));
    return name ?? undefined;
  }

  forget(text: string): void {
    if (this.names.has(text)) this.names.set(text, null);
  }
}

/** Postgres's refusal to run a prepared statement whose result columns a DDL changed (SQLSTATE 0A000). */
function planResultChanged(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e.code === '0A000' && /cached plan must not change result type/.test(e.message ?? '');
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
