/**
 * The embedded store's cache of its rows between batches: right when another process ran the stage in between, and
 * when the retention purge deleted rows it holds.
 */
import { describe, expect, it, vi } from 'vitest';
import { inMemoryLog } from '../../../test/helpers/embedded-log.js';
import { silentLogger } from '../../shared/logger.js';
import { Topics } from '../../shared/topics.js';
import { ok, type Stage } from '../contract.js';
import { EmbeddedLog } from './log.js';
import { EmbeddedStageRunner } from './runner.js';
import { flushTableStore, TableStoreCache } from './table-store.js';

const DAY = 24 * 3600_000;

const mem = inMemoryLog();

/** Counts the records of each key in its store: every count reads what the batches before wrote. */
function counting(name: string, store: string): Stage<unknown, { n: number }> {
  return {
    name,
    input: Topics.eventsRaw,
    store: { name: store, changelog: Topics.dedupeState, retentionMs: DAY },
    async processBatch(records, ctx) {
      for (const r of records) {
        const prior = await ctx.store.get(r.key!);
        await ctx.store.put(r.key!, { n: (prior?.n ?? 0) + 1 });
      }
      return records.map(() => ok());
    },
  };
}

const countOf = async (store: string, key: string): Promise<number | undefined> =>
  (await mem.db.query<{ value: { n: number } }>('SELECT value FROM state_store WHERE store = $1 AND key = $2', [store, key])).rows[0]?.value.n;

const append = (keys: string[]) => mem.log.append(Topics.eventsRaw, keys.map((key) => ({ key, value: { key } })), Date.now() + 10_000);

describe('the embedded store between batches', () => {
  it('reads the table again when another runner committed the stage since its last batch', async () => {
    const a = new EmbeddedStageRunner(mem.db, mem.log, counting('count-shared', 'count-shared'), { logger: silentLogger });
    const b = new EmbeddedStageRunner(mem.db, mem.log, counting('count-shared', 'count-shared'), { logger: silentLogger });
    await append(['k', 'k', 'k']);
    expect(await a.drain()).toBe(3);
    expect(await countOf('count-shared', 'k')).toBe(3);
    // Another process on the same Postgres takes the next batch.
    await append(['k', 'k']);
    expect(await b.drain()).toBe(2);
    expect(await countOf('count-shared', 'k')).toBe(5);
    // a's own rows say 3: it must see 5.
    await append(['k']);
    expect(await a.drain()).toBe(1);
    expect(await countOf('count-shared', 'k')).toBe(6);
  });

  it('forgets the rows the retention purge deletes', async () => {
    const stage = counting('count-purged', 'count-purged');
    const runner = new EmbeddedStageRunner(mem.db, mem.log, stage, { logger: silentLogger, idleWaitMs: 20 });
    await append(['p', 'p']);
    await runner.drain();
    expect(await countOf('count-purged', 'p')).toBe(2);
    // The row ages past the store's retention: the purge deletes it, so the next record counts from nothing.
    await mem.db.query("UPDATE state_store SET updated_at = now() - interval '2 days' WHERE store = 'count-purged'");
    await runner.start();
    try {
      await vi.waitFor(async () => expect(await countOf('count-purged', 'p')).toBeUndefined(), { timeout: 30_000, interval: 20 });
      await append(['p']);
      await vi.waitFor(async () => expect(await countOf('count-purged', 'p')).toBe(1), { timeout: 30_000, interval: 20 });
    } finally {
      await runner.stop();
    }
  });

  it('keeps what a batch read while a small cache evicts, and stays within its bound', async () => {
    const cache = new TableStoreCache<{ n: number }>('count-small', 2);
    await mem.db.query(`INSERT INTO state_store (store, key, value, updated_at) VALUES ('count-small', 'x', '{"n": 7}', now()), ('count-small', 'y', '{"n": 8}', now())`);
    await mem.db.transaction(async (tx) => {
      const t = cache.transaction(tx);
      const got = await t.getMany(['x', 'y', 'z', 'w']);
      expect([...got]).toEqual([
        ['x', { n: 7 }],
        ['y', { n: 8 }],
      ]);
      // x was evicted from the cache by z and w, but the batch still sees it.
      expect(await t.get('x')).toEqual({ n: 7 });
    });
    expect(cache.size).toBe(2);
  });

  it('writes each entry exactly as given (awkward values, a separator inside one), and deletes the deleted ones', async () => {
    const cache = new TableStoreCache<unknown>('awkward');
    const values: Record<string, unknown> = {
      a: { s: 'a \x1e separator, "quotes", \\ and 🙂', n: [1.5, null, { deep: '' }] },
      'key\x1ewith separator': ['top', 'level'],
      c: 'a plain string',
      d: 0,
    };
    await mem.db.transaction(async (tx) => {
      const t = cache.transaction(tx);
      for (const [k, v] of Object.entries(values)) await t.put(k, v);
      await flushTableStore(tx, 'awkward', t);
    });
    await mem.db.transaction(async (tx) => {
      const t = cache.transaction(tx);
      t.delete('c');
      await t.put('d', { d: 1 });
      await flushTableStore(tx, 'awkward', t);
    });
    const r = await mem.db.query<{ key: string; value: string }>("SELECT key, value::text AS value FROM state_store WHERE store = 'awkward' ORDER BY key");
    const stored = Object.fromEntries(r.rows.map((row) => [row.key, JSON.parse(row.value) as unknown]));
    expect(stored).toEqual({ a: values.a, 'key\x1ewith separator': values['key\x1ewith separator'], d: { d: 1 } });
  });
});
