/**
 * Which consumers a batch of the embedded runner wakes: those of the topics it appended to, and no others (a woken
 * consumer with nothing new runs an empty batch: a transaction, its lock and two reads); and a runner that read less
 * than it asked for waits for the next append rather than reading again to find nothing.
 */
import { describe, expect, it, vi } from 'vitest';
import type { Db } from '../../shared/db/db.js';
import { silentLogger } from '../../shared/logger.js';
import { Topics, type TopicName } from '../../shared/topics.js';
import { dlq, drop, ok, type Stage } from '../contract.js';
import { EmbeddedStageRunner } from './runner.js';
import { inMemoryLog } from '../../../test/helpers/embedded-log.js';

const store = inMemoryLog();

/** Passes `pass:` records on, drops `drop:` ones, dead-letters `bad:` ones. */
function sorting(name: string): Stage<{ key: string }> {
  return {
    name,
    input: Topics.eventsRaw,
    async processBatch(records) {
      return records.map((r) =>
        r.key.startsWith('pass:') ? ok({ topic: Topics.eventsDeduped, key: r.key, value: r.value }) : r.key.startsWith('bad:') ? dlq('bad_record') : drop('not_wanted'),
      );
    },
  };
}

/** The topics woken while `run` runs. */
async function wokenBy(run: () => Promise<unknown>): Promise<TopicName[]> {
  const woken: TopicName[] = [];
  const listen = (t: TopicName): void => void woken.push(t);
  store.log.appended.on('append', listen);
  try {
    await run();
  } finally {
    store.log.appended.off('append', listen);
  }
  return woken;
}

const append = (keys: string[]) => store.log.append(Topics.eventsRaw, keys.map((key) => ({ key, value: { key } })), Date.now() + 10_000);

describe('the embedded runner wakes', () => {
  it('the consumers of the topics a batch appended to, once each, and no others', async () => {
    const runner = new EmbeddedStageRunner(store.db, store.log, sorting('sort-1'), { logger: silentLogger });
    await append(['pass:1', 'drop:2', 'bad:3', 'pass:4']);
    expect((await wokenBy(() => runner.drain())).sort()).toEqual([Topics.eventsDeduped, Topics.eventsDlq].sort());
    expect((await store.db.query('SELECT count(*)::int AS n FROM log_records WHERE topic = $1', [Topics.eventsDeduped])).rows[0]).toEqual({ n: 2 });
  });

  it('nobody for a batch that appended nothing, nor for an input with nothing new', async () => {
    const runner = new EmbeddedStageRunner(store.db, store.log, sorting('sort-2'), { logger: silentLogger });
    expect(await runner.drain()).toBeGreaterThan(0); // what the test before appended
    await append(['drop:5', 'drop:6']);
    expect(await wokenBy(() => runner.drain())).toEqual([]);
    expect(await wokenBy(() => runner.drain())).toEqual([]);
  });
});

describe('the embedded runner, once its input is drained', () => {
  it('waits for the next append after a batch that read less than it asked for, without an empty read', async () => {
    let transactions = 0;
    const counted = new Proxy(store.db, {
      get: (target, prop, receiver) =>
        prop === 'transaction'
          ? (...args: Parameters<Db['transaction']>) => {
              transactions++;
              return target.transaction(...args);
            }
          : Reflect.get(target, prop, receiver),
    });
    const stage = sorting('sort-3');
    let batches = 0;
    const runner = new EmbeddedStageRunner(counted, store.log, { ...stage, processBatch: (r, ctx) => (batches++, stage.processBatch(r, ctx)) }, { logger: silentLogger, idleWaitMs: 60_000 });
    await runner.drain(); // what the tests before appended
    transactions = 0;
    await runner.start();
    try {
      await vi.waitFor(() => expect(transactions).toBe(1)); // the first read: nothing new, then the wait
      await append(['pass:7', 'pass:8', 'pass:9']);
      await vi.waitFor(() => expect(batches).toBe(1));
      await new Promise((r) => setTimeout(r, 300));
      // The batch of three, read in the second transaction, drained the input: no third one until an append.
      expect(transactions).toBe(2);
      await append(['pass:10']);
      await vi.waitFor(() => expect(batches).toBe(2));
      await new Promise((r) => setTimeout(r, 300));
      expect(transactions).toBe(3);
    } finally {
      await runner.stop();
    }
  });

  it("an append announced since a reader's reading is not waited for", async () => {
    const since = store.log.announcedTo(Topics.eventsRaw);
    await append(['drop:11']);
    const waited = await Promise.race([
      store.log.waitForAppend(Topics.eventsRaw, 60_000, undefined, since).then(() => 'returned'),
      new Promise((r) => setTimeout(() => r('waited'), 1_000)),
    ]);
    expect(waited).toBe('returned');
    // Without a reading, or with the current one, it waits for the next append.
    const now = store.log.announcedTo(Topics.eventsRaw);
    const wait = store.log.waitForAppend(Topics.eventsRaw, 60_000, undefined, now).then(() => 'returned');
    expect(await Promise.race([wait, new Promise((r) => setTimeout(() => r('waited'), 200))])).toBe('waited');
    await append(['drop:12']);
    expect(await wait).toBe('returned');
  });
});
