/**
 * The embedded runtime's state store: rows of state_store, read once per batch for the keys a stage asks for, written
 * back with ONE upsert (and one delete for removed keys) in the batch's transaction, with its outputs and offset.
 */
import { msInterval as ms, type Sql } from '../../shared/db/db.js';
import { StoreTransaction } from '../store.js';

/** A batch's store transaction over the table: reads go to the table once per key, writes wait for flushTableStore. */
export function tableStoreTransaction<S>(sql: Sql, store: string): StoreTransaction<S> {
  const loaded = new Map<string, S | undefined>();
  return new StoreTransaction<S>(
    (key) => loaded.get(key),
    async (keys) => {
      const missing = [...new Set(keys.filter((k) => !loaded.has(k)))];
      if (missing.length === 0) return;
      const r = await sql.query<{ key: string; value: S }>('SELECT key, value FROM state_store WHERE store = $1 AND key = ANY($2::text[])', [
        store,
        missing,
      ]);
      for (const k of missing) loaded.set(k, undefined);
      for (const row of r.rows) loaded.set(row.key, row.value);
    },
  );
}

/** Writes a batch's store changes (null: delete) in the caller's transaction. */
export async function flushTableStore<S>(sql: Sql, store: string, tx: StoreTransaction<S>): Promise<void> {
  const puts: Array<[string, S]> = [];
  const deletes: string[] = [];
  for (const [key, value] of tx.changes()) {
    if (value === null) deletes.push(key);
    else puts.push([key, value]);
  }
  if (puts.length > 0) {
    // One JSON text of [key, value] pairs (cheaper than two array parameters on PGlite, see log.ts).
    await sql.query(
      `INSERT INTO state_store (store, key, value, updated_at)
       SELECT $1, e->>0, e->1, now() FROM jsonb_array_elements($2::jsonb) AS t(e)
       ON CONFLICT (store, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()`,
      [store, JSON.stringify(puts)],
    );
  }
  if (deletes.length > 0) await sql.query('DELETE FROM state_store WHERE store = $1 AND key = ANY($2::text[])', [store, deletes]);
}

/** Which keys a purge looks at: those with a prefix, or all but those with the given prefixes. */
export interface PurgeKeys {
  readonly prefix?: string;
  readonly except?: readonly string[];
}

/** Purges every retention class of a store (contract.ts StoreSpec). Returns how many entries went. */
export async function purgeStoreRetention(db: Sql, spec: { readonly name: string; readonly retentionMs?: number; readonly retentionByPrefix?: Readonly<Record<string, number>> }): Promise<number> {
  const prefixes = Object.entries(spec.retentionByPrefix ?? {});
  let n = 0;
  for (const [prefix, ms] of prefixes) n += await purgeStore(db, spec.name, ms, undefined, { prefix });
  if (spec.retentionMs !== undefined) n += await purgeStore(db, spec.name, spec.retentionMs, undefined, { except: prefixes.map(([p]) => p) });
  return n;
}

/**
 * Deletes entries of a store not written for `retentionMs` (bounded storage for windowed stores such as dedupe's).
 * In chunks, so one purge never holds a long transaction over a large table.
 */
export async function purgeStore(db: Sql, store: string, retentionMs: number, chunk = 5_000, keys: PurgeKeys = {}): Promise<number> {
  let total = 0;
  // Prefixes are matched with starts_with (no LIKE pattern characters to escape).
  const only = keys.prefix === undefined ? '' : 'AND starts_with(key, $4)';
  const except = keys.except && keys.except.length > 0 ? `AND NOT EXISTS (SELECT 1 FROM unnest($${keys.prefix === undefined ? 4 : 5}::text[]) AS p(x) WHERE starts_with(key, p.x))` : '';
  const params: unknown[] = [store, retentionMs, chunk];
  if (keys.prefix !== undefined) params.push(keys.prefix);
  if (except) params.push(keys.except);
  for (;;) {
    const r = await db.query<{ key: string }>(
      `DELETE FROM state_store WHERE store = $1 AND key IN (
         SELECT key FROM state_store WHERE store = $1 AND updated_at < now() - ${ms('$2')} ${only} ${except}
         LIMIT $3)
       RETURNING key`,
      params,
    );
    total += r.rows.length;
    if (r.rows.length < chunk) return total;
  }
}
