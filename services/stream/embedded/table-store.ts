/**
 * The embedded runtime's state store: rows of state_store, read for the keys a stage asks for, written back with ONE
 * upsert (and one delete for removed keys) in the batch's transaction, with its outputs and offset. The rows the runner
 * has read or written are kept between batches (TableStoreCache), so a returning key costs no read.
 */
import { LRUCache } from 'lru-cache';
import { msInterval as ms, type Sql } from '../../shared/db/db.js';
import { joinJsonTexts, jsonText, splitJsonTexts } from '../../shared/db/json-texts.js';
import { StoreTransaction } from '../store.js';

/**
 * How many keys of a store the runner keeps in memory (present or known to be absent): enough for the entries that
 * come back batch after batch (a returning person's identifiers and cluster), bounded whatever the table holds.
 */
export const TABLE_CACHE_ENTRIES = 100_000;

/**
 * The committed rows of one stage's store, as the runner that owns the stage last read or wrote them. It is right
 * while this runner is the only one committing the stage: the runner checks, under the stage's lock, that the stage's
 * committed offset is the one it committed last, and clears the cache when another process ran the stage in between
 * (two processes on one Postgres: runner.ts). Rows the runner purges are forgotten with them. Values are shared with
 * the batches, as in the Kafka runtime's store: a stage never changes what it reads.
 */
export class TableStoreCache<S> {
  private readonly rows: LRUCache<string, { readonly value: S | undefined }>;

  constructor(
    readonly store: string,
    max = TABLE_CACHE_ENTRIES,
  ) {
    this.rows = new LRUCache({ max });
  }

  get size(): number {
    return this.rows.size;
  }

  /** Forgets every row: the table may hold newer ones (another process committed the stage). */
  clear(): void {
    this.rows.clear();
  }

  /** A batch's store transaction: reads come from the cache, or from the table once per key. */
  transaction(sql: Sql): StoreTransaction<S> {
    return tableStoreTransaction<S>(sql, this.store, this.rows);
  }

  /** After the batch's transaction committed: its writes. */
  committed(tx: StoreTransaction<S>): void {
    for (const [key, value] of tx.changes()) this.rows.set(key, { value: value ?? undefined });
  }

  /** Rows deleted from the table outside a batch (the retention purge). */
  forget(keys: readonly string[]): void {
    for (const k of keys) this.rows.delete(k);
  }
}

/**
 * A batch's store transaction over the table: reads go to the table once per key (or to `known`, rows already read
 * in earlier batches), writes wait for flushTableStore. What the batch read stays in its own map, so a bounded `known`
 * evicting during the batch changes nothing the batch sees.
 */
export function tableStoreTransaction<S>(sql: Sql, store: string, known?: LRUCache<string, { readonly value: S | undefined }>): StoreTransaction<S> {
  const loaded = new Map<string, S | undefined>();
  return new StoreTransaction<S>(
    (key) => loaded.get(key),
    async (keys) => {
      const missing: string[] = [];
      for (const k of keys) {
        if (loaded.has(k)) continue;
        const hit = known?.get(k);
        if (hit) loaded.set(k, hit.value);
        else missing.push(k);
      }
      if (missing.length === 0) return;
      const unique = [...new Set(missing)];
      // As text, parsed here (as the log's records: log.ts).
      const r = await sql.query<{ key: string; value: string }>('SELECT key, value::text AS value FROM state_store WHERE store = $1 AND key = ANY($2::text[])', [
        store,
        unique,
      ]);
      for (const k of unique) loaded.set(k, undefined);
      for (const row of r.rows) loaded.set(row.key, JSON.parse(row.value) as S);
      if (known) for (const k of unique) known.set(k, { value: loaded.get(k) });
    },
  );
}

/** Writes a batch's store changes (null: delete) in the caller's transaction. */
export async function flushTableStore<S>(sql: Sql, store: string, tx: StoreTransaction<S>): Promise<void> {
  const keys: string[] = [];
  const values: string[] = [];
  const deletes: string[] = [];
  for (const [key, value] of tx.changes()) {
    if (value === null) deletes.push(key);
    else {
      keys.push(key);
      values.push(jsonText(value));
    }
  }
  if (keys.length > 0) {
    // The values as one text of JSON documents (shared/db/json-texts.ts, as the log's appends: log.ts).
    await sql.query(
      `INSERT INTO state_store (store, key, value, updated_at)
       SELECT $1, t.k, t.v::json, now() FROM unnest($2::text[], ${splitJsonTexts('$3')}) AS t(k, v)
       ON CONFLICT (store, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()`,
      [store, keys, joinJsonTexts(values)],
    );
  }
  if (deletes.length > 0) await sql.query('DELETE FROM state_store WHERE store = $1 AND key = ANY($2::text[])', [store, deletes]);
}

/** Which keys a purge looks at: those with a prefix, or all but those with the given prefixes. */
export interface PurgeKeys {
  readonly prefix?: string;
  readonly except?: readonly string[];
}

/**
 * Purges every retention class of a store (contract.ts StoreSpec). Returns how many entries went; `forget` hears
 * their keys (the runner's cache of the store).
 */
export async function purgeStoreRetention(
  db: Sql,
  spec: { readonly name: string; readonly retentionMs?: number; readonly retentionByPrefix?: Readonly<Record<string, number>> },
  forget?: (keys: readonly string[]) => void,
): Promise<number> {
  const prefixes = Object.entries(spec.retentionByPrefix ?? {});
  let n = 0;
  for (const [prefix, ms] of prefixes) n += await purgeStore(db, spec.name, ms, undefined, { prefix }, forget);
  if (spec.retentionMs !== undefined) n += await purgeStore(db, spec.name, spec.retentionMs, undefined, { except: prefixes.map(([p]) => p) }, forget);
  return n;
}

/**
 * Deletes entries of a store not written for `retentionMs` (bounded storage for windowed stores such as dedupe's).
 * In chunks, so one purge never holds a long transaction over a large table.
 */
export async function purgeStore(
  db: Sql,
  store: string,
  retentionMs: number,
  chunk = 5_000,
  keys: PurgeKeys = {},
  forget?: (keys: readonly string[]) => void,
): Promise<number> {
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
    forget?.(r.rows.map((row) => row.key));
    if (r.rows.length < chunk) return total;
  }
}
