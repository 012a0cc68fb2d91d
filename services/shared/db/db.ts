/**
 * The one database interface of the service. Two implementations: the embedded default (PGlite, a WASM Postgres
 * in DATA_DIR) and a real Postgres (DATABASE_URL). Code above this module writes plain Postgres SQL and runs the
 * same on both; migrations are shared (see migrate.ts).
 */
export interface QueryResult<R> {
  rows: R[];
  affectedRows?: number;
}

export interface Sql {
  query<R = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>>;
}

/** A transaction's session: besides single statements, it runs a script of several (a migration file) as one. */
export interface Tx extends Sql {
  exec(script: string): Promise<void>;
}

export interface TransactionOptions {
  /**
   * Someone waits for this transaction against a deadline (the gateway's log appends): where the store serialises
   * transactions (the embedded one), it goes before waiting background work (the stages' batches), which is never
   * passed over for longer than the store's fairness bound. Postgres runs transactions side by side and ignores it.
   */
  readonly urgent?: boolean;
}

export interface Db extends Sql {
  readonly kind: 'pglite' | 'postgres';
  /** Runs fn in one transaction: committed when fn resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: Tx) => Promise<T>, opts?: TransactionOptions): Promise<T>;
  close(): Promise<void>;
}

/**
 * fn between BEGIN and COMMIT on one connection (`sql` must be a single session, not a pool); on any failure,
 * fn's or COMMIT's, a ROLLBACK (whose own failure is ignored) and the error again. Both stores' transaction().
 */
export async function inTransaction<T>(sql: Tx, fn: (tx: Tx) => Promise<T>): Promise<T> {
  await sql.query('BEGIN');
  try {
    const out = await fn(sql);
    await sql.query('COMMIT');
    return out;
  } catch (err) {
    await sql.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/** Postgres bigint columns come back as strings from pg and numbers from PGlite; this reads both. */
export function toNumber(v: unknown): number {
  return typeof v === 'number' ? v : Number(v);
}

/**
 * A SQL interval of `v` milliseconds: a number is inlined (never user input), a parameter reference (`'$2'`) is read as
 * a double precision number of milliseconds.
 */
export const msInterval = (v: number | `$${number}`): string =>
  `(${typeof v === 'number' ? Number(v) : v}::double precision * interval '1 millisecond')`;
