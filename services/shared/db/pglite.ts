import { mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import type { Db, QueryResult, Sql } from './db.js';

/** Opens the embedded store. dataDir undefined = in memory (tests). */
export async function openPglite(dataDir: string | undefined): Promise<Db> {
  if (dataDir) mkdirSync(dataDir, { recursive: true });
  const pg = new PGlite(dataDir);
  await pg.waitReady;
  const wrap = (q: { query: PGlite['query'] }): Sql => ({
    async query<R>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
      const r = await q.query<R>(text, params as unknown[] | undefined);
      return { rows: r.rows, affectedRows: r.affectedRows };
    },
  });
  const base = wrap(pg);
  return {
    kind: 'pglite',
    query: base.query,
    transaction: (fn) => pg.transaction((tx) => fn(wrap(tx))),
    close: () => pg.close(),
  };
}
