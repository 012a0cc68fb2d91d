/**
 * An `ahead` stage on the embedded runtime (contract.ts): its batch is processed holding no transaction, then
 * committed in a short one that checks, under the stage's lock, that nothing moved; whatever fails there, or no longer
 * holds, is processed again inside its transaction. Outputs, state and writes land once whichever way the batch went.
 */
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../shared/logger.js';
import { Topics } from '../../shared/topics.js';
import { ok, StaleBatchError, type BatchContext, type InputRecord, type Stage } from '../contract.js';
import { EmbeddedStageRunner } from './runner.js';
import { inMemoryLog } from '../../../test/helpers/embedded-log.js';

const mem = inMemoryLog();

/**
 * How each batch was processed: in its transaction or ahead of it. (Every test's stage is new and reads events.raw
 * from its start: the records of the tests before come along.)
 */
type Seen = Array<{ keys: string[]; inTransaction: boolean }>;

/**
 * Passes every record on to events.deduped, counts each key in its store, and files each key in ahead_writes through
 * ctx.write. `during` runs inside processBatch (the test's interference).
 */
function counting(name: string, seen: Seen, during?: (ctx: BatchContext<number>, records: readonly InputRecord<unknown>[]) => Promise<void>): Stage<unknown, number> {
  return {
    name,
    input: Topics.eventsRaw,
    ahead: true,
    store: { name: `${name}-store`, changelog: Topics.dedupeState },
    async processBatch(records, ctx) {
      seen.push({ keys: records.map((r) => r.key), inTransaction: ctx.inTransaction });
      const counts = await ctx.store.getMany(records.map((r) => r.key));
      for (const r of records) await ctx.store.put(r.key, (counts.get(r.key) ?? 0) + 1);
      await during?.(ctx, records);
      const keys = records.map((r) => r.key);
      ctx.write((tx) => tx.query('INSERT INTO ahead_writes (stage, k) SELECT $1, unnest($2::text[])', [name, keys]).then(() => undefined));
      return records.map((r) => ok({ topic: Topics.eventsDeduped, key: r.key, value: r.value }));
    },
  };
}

let appended = 0;
/** Appends n records to events.raw under keys unique to the test. */
async function append(prefix: string, n: number): Promise<string[]> {
  const keys = Array.from({ length: n }, (_, i) => `${prefix}:${appended + i}`);
  appended += n;
  await mem.log.append(Topics.eventsRaw, keys.map((key) => ({ key, value: { key } })), Date.now() + 10_000);
  return keys;
}

/** What landed for the keys: outputs, store counts and writes, each key's number of each. */
async function landed(stage: string, keys: string[]) {
  const count = async (text: string, params: unknown[]) =>
    Object.fromEntries((await mem.db.query<{ k: string; n: number }>(text, params)).rows.map((r) => [r.k, Number(r.n)]));
  return {
    outputs: await count('SELECT key AS k, count(*)::int AS n FROM log_records WHERE topic = $1 AND key = ANY($2::text[]) GROUP BY key', [Topics.eventsDeduped, keys]),
    store: await count(`SELECT key AS k, (value::text)::int AS n FROM state_store WHERE store = $1 AND key = ANY($2::text[])`, [`${stage}-store`, keys]),
    writes: await count('SELECT k, count(*)::int AS n FROM ahead_writes WHERE stage = $1 AND k = ANY($2::text[]) GROUP BY k', [stage, keys]),
  };
}

const once = (keys: string[]) => Object.fromEntries(keys.map((k) => [k, 1]));
const runner = (stage: Stage<unknown, number>) => new EmbeddedStageRunner(mem.db, mem.log, stage, { logger: silentLogger });

describe('an ahead stage on the embedded runtime', () => {
  it('processes its batch holding no transaction: another transaction commits meanwhile, and its writes land once', async () => {
    await mem.db.query('CREATE TABLE IF NOT EXISTS ahead_writes (stage text NOT NULL, k text NOT NULL)');
    const seen: Seen = [];
    // An append is a transaction of its own: on the store's one connection it could not run inside the batch's.
    const meanwhile = (): Promise<void> =>
      Promise.race([
        mem.log.append(Topics.eventsDlq, [{ key: 'meanwhile', value: {} }], Date.now() + 10_000).then(() => undefined),
        new Promise<void>((_, reject) => setTimeout(() => reject(new Error('the batch held the connection')), 3_000)),
      ]);
    const keys = await append('free', 5);
    expect(await runner(counting('free', seen, meanwhile)).drain()).toBe(5);
    expect(seen).toEqual([{ keys, inTransaction: false }]); // the first test: its records only
    expect(await landed('free', keys)).toEqual({ outputs: once(keys), store: once(keys), writes: once(keys) });
  });

  it('a write that throws StaleBatchError: the batch is processed again in its transaction and lands once', async () => {
    const seen: Seen = [];
    let stale = true;
    const stage = counting('stale', seen, async (ctx) => {
      ctx.write(async () => {
        if (!ctx.inTransaction && stale) throw new StaleBatchError('moved');
      });
    });
    // The first pass's state writes (counts) must not survive it: store counts of 1, not 2.
    const keys = await append('stale', 4);
    await runner(stage).drain();
    expect(seen.map((s) => s.inTransaction)).toEqual([false, true]);
    expect(await landed('stale', keys)).toEqual({ outputs: once(keys), store: once(keys), writes: once(keys) });
    stale = false;
    const more = await append('stale', 2);
    await runner(stage).drain();
    expect(seen.map((s) => s.inTransaction)).toEqual([false, true, false]);
    expect(await landed('stale', more)).toEqual({ outputs: once(more), store: once(more), writes: once(more) });
  });

  it('a batch whose processing throws ahead is processed again in its transaction, under the error policy', async () => {
    const seen: Seen = [];
    const stage = counting('throws', seen, async (ctx) => {
      if (!ctx.inTransaction) throw new Error('only ahead');
    });
    const keys = await append('throws', 3);
    await runner(stage).drain();
    expect(seen.map((s) => s.inTransaction)).toEqual([false, true]);
    expect(await landed('throws', keys)).toEqual({ outputs: once(keys), store: once(keys), writes: once(keys) });
  });

  it('another process committing the stage while a batch is processed ahead: nothing is lost or doubled', async () => {
    const seen: Seen = [];
    let other: EmbeddedStageRunner<unknown, number> | undefined;
    const stage: Stage<unknown, number> = counting('two', seen, async () => {
      // The first batch of the first runner: a second runner of the stage (another process on one Postgres, with
      // its own cache of the store) takes the same records and commits them first.
      if (!other) {
        other = runner(stage);
        await other.drain();
      }
    });
    const keys = await append('two', 6);
    const first = runner(stage);
    await first.drain();
    // The second runner committed the six; the first found the stage moved and had nothing left to read.
    expect(seen.map((s) => s.keys.filter((k) => keys.includes(k)).length)).toEqual([6, 6]);
    expect(await landed('two', keys)).toEqual({ outputs: once(keys), store: once(keys), writes: once(keys) });
    // The same keys again, to the first runner: it read them as absent before the second committed them, so it must
    // have dropped what it held of the store, and count them from the table.
    await mem.log.append(Topics.eventsRaw, keys.map((key) => ({ key, value: { key } })), Date.now() + 10_000);
    expect(await first.drain()).toBe(6);
    const twice = Object.fromEntries(keys.map((k) => [k, 2]));
    expect(await landed('two', keys)).toEqual({ outputs: twice, store: twice, writes: twice });
  });
});
