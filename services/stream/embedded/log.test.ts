/**
 * The embedded log's deadline: an append is committed only when its commit, at the measured pace, ends
 * inside its deadline; otherwise it is refused unwritten (503), never answered late.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../shared/db/open.js';
import { Topics } from '../../shared/topics.js';
import { NotDurableError } from '../log.js';
import { EmbeddedLog, appendInTransaction } from './log.js';

const records = (n: number, tag: string) => Array.from({ length: n }, (_, i) => ({ key: `${tag}-${i}`, value: { tag, i, pad: 'x'.repeat(200) } }));

describe('EmbeddedLog deadlines', () => {
  const opened = openDatabase({ inMemory: true });
  afterAll(async () => (await opened).close());

  async function count(tag: string): Promise<number> {
    const db = await opened;
    const r = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM log_records WHERE value->>'tag' = $1", [tag]);
    return r.rows[0]!.n;
  }

  it('refuses, unwritten, an append whose commit would end past its deadline; commits one that fits', async () => {
    const db = await opened;
    const log = new EmbeddedLog(db);
    // Learn the pace on a first group (thousands of records: a few hundred ms).
    await log.append(Topics.eventsRaw, records(3_000, 'warm'), Date.now() + 30_000);
    let open!: () => void;
    const held = new Promise<void>((r) => (open = r));
    // A stage batch holds the store.
    const holder = db.transaction(async () => held);
    const deadline = Date.now() + 1_000;
    // Settled into a value at once: a refusal that comes while the test still awaits the holder is not unhandled.
    const settled = log.append(Topics.eventsRaw, records(20_000, 'late'), deadline).then(
      () => ({ ok: true as const }),
      (err: unknown) => ({ ok: false as const, err }),
    );
    const early = log.append(Topics.eventsRaw, records(10, 'fits'), Date.now() + 30_000);
    // The timer is what is under test: the store frees with ~150 ms of the deadline left (on a slow machine, less
    // or none), never enough for 20,000 records (the pace is at least ~10 µs per record anywhere: 200 ms).
    setTimeout(open, 850);
    await holder;
    const late = await settled;
    expect(late.ok).toBe(false);
    expect((late as { err: unknown }).err).toBeInstanceOf(NotDurableError);
    await early;
    expect(await count('late')).toBe(0);
    expect(await count('fits')).toBe(10);
    await log.close();
  });
});

describe('appendInTransaction', () => {
  const opened = openDatabase({ inMemory: true });
  afterAll(async () => (await opened).close());

  it('copies a record passed on unchanged from its row (sameAs), in order with the records it is given whole', async () => {
    const db = await opened;
    const log = new EmbeddedLog(db);
    const raw = records(3, 'copy');
    await db.transaction((tx) => appendInTransaction(tx, new Map([[Topics.eventsRaw, raw]])));
    const [a, , c] = await log.read(Topics.eventsRaw, 0, 10);
    await db.transaction((tx) =>
      appendInTransaction(
        tx,
        new Map([
          [
            Topics.eventsDeduped,
            [
              { key: 'k-c', value: c!.value, sameAs: { topic: Topics.eventsRaw, offset: c!.offset } },
              { key: 'k-new', value: { tag: 'copy', whole: true } },
              { key: 'k-a', value: a!.value, sameAs: { topic: Topics.eventsRaw, offset: a!.offset } },
            ],
          ],
        ]),
      ),
    );
    const out = await log.read(Topics.eventsDeduped, 0, 10);
    expect(out.map((r) => [r.key, r.value])).toEqual([
      ['k-c', raw[2]!.value],
      ['k-new', { tag: 'copy', whole: true }],
      ['k-a', raw[0]!.value],
    ]);
  });

  it('bad input: a copy of a record that is not in the log fails the append, and nothing of it is written', async () => {
    const db = await opened;
    const log = new EmbeddedLog(db);
    const before = (await log.read(Topics.conversionsReady, 0, 10)).length;
    await expect(
      db.transaction((tx) =>
        appendInTransaction(
          tx,
          new Map([
            [
              Topics.conversionsReady,
              [
                { key: 'k-1', value: { whole: 1 } },
                { key: 'k-2', value: null, sameAs: { topic: Topics.eventsRaw, offset: 999_999 } },
              ],
            ],
          ]),
        ),
      ),
    ).rejects.toThrow(/null value/);
    expect((await log.read(Topics.conversionsReady, 0, 10)).length).toBe(before);
  });
});
