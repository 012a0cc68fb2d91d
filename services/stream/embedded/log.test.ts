/**
 * The embedded log's deadline: an append is committed only when its commit, at the measured pace, ends
 * inside its deadline; otherwise it is refused unwritten (503), never answered late.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { Db } from '../../shared/db/db.js';
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

/** A transaction that holds the store until `open` is called: appends made meanwhile go in the next group commit. */
async function holdStore(db: Db): Promise<{ open: () => void; holder: Promise<void> }> {
  let open!: () => void;
  let entered!: () => void;
  const holding = new Promise<void>((r) => (entered = r));
  const holder = db.transaction(
    async () =>
      new Promise<void>((r) => {
        open = r;
        entered();
      }),
  );
  await holding;
  return { open, holder };
}

describe('appends: what is written is read back as it was', () => {
  const opened = openDatabase({ inMemory: true });
  afterAll(async () => (await opened).close());
  const awkward = [
    { key: 'q', value: { s: 'quotes " and \\ backslashes \\" and \\u0000-looking text', nested: { a: [1, null, { b: '' }] } } },
    { key: 'u', value: { s: 'ümlaut – ✓ 🙂 中文', n: -0.5, big: 1e300 } },
    { key: 'n', value: null },
    { key: 'a', value: ['top', 'level', 'array'] },
    { key: 's', value: 'a plain string' },
    // The values travel joined by U+001E (shared/db/json-texts.ts): one inside a value, or a key, changes nothing.
    { key: 'sep\x1ein key', value: { s: 'a \x1e separator, \u001f and a newline\n inside', list: ['\x1e', ''] } },
  ];

  it('several topics in one transaction: each topic its own records, in order, values exactly as given', async () => {
    const db = await opened;
    const log = new EmbeddedLog(db);
    await db.transaction((tx) =>
      appendInTransaction(
        tx,
        new Map([
          [Topics.conversionsReady, awkward],
          [Topics.eventsDlq, records(3, 'dlq')],
          [Topics.eventsRaw, records(2, 'raw')],
        ]),
      ),
    );
    expect((await log.read(Topics.conversionsReady, 0, 10)).map((r) => [r.key, r.value])).toEqual(awkward.map((r) => [r.key, r.value]));
    expect((await log.read(Topics.eventsDlq, 0, 10)).map((r) => r.key)).toEqual(['dlq-0', 'dlq-1', 'dlq-2']);
    expect((await log.read(Topics.eventsRaw, 0, 10)).map((r) => r.key)).toEqual(['raw-0', 'raw-1']);
  });

  it('bad input: a record that cannot be serialised fails the whole transaction, the topics before it included', async () => {
    const db = await opened;
    const log = new EmbeddedLog(db);
    const before = (await log.read(Topics.eventsDeduped, 0, 100)).length;
    await expect(
      db.transaction((tx) =>
        appendInTransaction(
          tx,
          new Map([
            // Sorted first: its statements are on their way when the next topic's records fail to serialise, and its
            // insert fails too (a copy of a record not in the log): a failure nobody waited for would be unhandled.
            [Topics.conversionsDlq, [...records(2, 'first'), { key: 'gone', value: null, sameAs: { topic: Topics.eventsRaw, offset: 999_999 } }]],
            [Topics.eventsDeduped, [{ key: 'bad', value: { n: 10n } }]],
          ]),
        ),
      ),
    ).rejects.toThrow(/BigInt/);
    expect((await log.read(Topics.eventsDeduped, 0, 100)).length).toBe(before);
    expect(await log.read(Topics.conversionsDlq, 0, 100)).toEqual([]);
  });

  it('concurrent appends go in one group commit, each caller answered, each topic in the order of the calls', async () => {
    const db = await opened;
    const log = new EmbeddedLog(db);
    const deadline = Date.now() + 30_000;
    // The store held by a transaction: the appends queue up and the next group takes them all.
    const { open, holder } = await holdStore(db);
    const calls = [
      log.append(Topics.identityChanges, [awkward[0]!, awkward[1]!], deadline),
      log.append(Topics.conversionsReady, records(2, 'group-a'), deadline),
      log.append(Topics.identityChanges, [awkward[2]!], deadline),
      log.append(Topics.conversionsReady, records(1, 'group-b'), deadline),
    ];
    open();
    await holder;
    await Promise.all(calls);
    expect((await log.read(Topics.identityChanges, 0, 10)).map((r) => [r.key, r.value])).toEqual(
      [awkward[0]!, awkward[1]!, awkward[2]!].map((r) => [r.key, r.value]),
    );
    const ready = await log.read(Topics.conversionsReady, 0, 100);
    expect(ready.slice(-3).map((r) => r.key)).toEqual(['group-a-0', 'group-a-1', 'group-b-0']);
    await log.close();
  });

  it('a group commit keeps a copy (sameAs) among whole records of other appends, each in its place', async () => {
    const db = await opened;
    const log = new EmbeddedLog(db);
    const deadline = Date.now() + 30_000;
    await log.append(Topics.eventsRaw, records(1, 'source'), deadline);
    const [source] = (await log.read(Topics.eventsRaw, 0, 1000)).filter((r) => r.key === 'source-0');
    const { open, holder } = await holdStore(db);
    const copy = { key: 'copied', value: source!.value, sameAs: { topic: Topics.eventsRaw, offset: source!.offset } };
    const calls = [
      log.append(Topics.eventsDlq, records(2, 'before'), deadline),
      log.append(Topics.eventsDlq, [copy], deadline),
      log.append(Topics.eventsDlq, records(1, 'after'), deadline),
    ];
    open();
    await holder;
    await Promise.all(calls);
    const dlq = (await log.read(Topics.eventsDlq, 0, 1000)).filter((r) => ['before-0', 'before-1', 'copied', 'after-0'].includes(r.key));
    expect(dlq.map((r) => [r.key, r.value])).toEqual([
      ['before-0', records(2, 'before')[0]!.value],
      ['before-1', records(2, 'before')[1]!.value],
      ['copied', source!.value],
      ['after-0', records(1, 'after')[0]!.value],
    ]);
    await log.close();
  });
});
