/**
 * The embedded store's turns: the gateway's appends (urgent) go before waiting stage batches, and a batch
 * is never passed over for longer than the fairness bound.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase } from './open.js';
import { FairTaskQueue } from './pglite.js';

function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

describe('FairTaskQueue', () => {
  it('runs one task at a time; an urgent task goes before normal ones that were waiting', async () => {
    const turns = new FairTaskQueue(10_000);
    const order: string[] = [];
    const first = gate();
    const holding = gate();
    const running = turns.run(async () => {
      order.push('first');
      holding.open();
      await first.promise;
    });
    const normal = turns.run(async () => void order.push('normal'));
    const urgent = turns.run(async () => void order.push('urgent'), true);
    // The first task holds the turn: the two queued behind it have not run.
    await holding.promise;
    expect(order).toEqual(['first']);
    first.open();
    await Promise.all([running, normal, urgent]);
    expect(order).toEqual(['first', 'urgent', 'normal']);
  });

  it('a normal task that waited the fairness bound goes before urgent ones', async () => {
    let clock = 0;
    const turns = new FairTaskQueue(500, () => clock);
    const order: string[] = [];
    const first = gate();
    const running = turns.run(async () => first.promise);
    const normal = turns.run(async () => void order.push('normal'));
    const urgent = turns.run(async () => void order.push('urgent'), true);
    clock = 500;
    first.open();
    await Promise.all([running, normal, urgent]);
    expect(order).toEqual(['normal', 'urgent']);
  });

  it('a task that throws (even synchronously) fails alone; the next one runs', async () => {
    const turns = new FairTaskQueue();
    const failing = turns.run((() => {
      throw new Error('boom');
    }) as () => Promise<void>);
    const next = turns.run(async () => 'ran');
    await expect(failing).rejects.toThrow('boom');
    await expect(next).resolves.toBe('ran');
  });
});

describe('the embedded store', () => {
  const opened = openDatabase({ inMemory: true });
  afterAll(async () => (await opened).close());

  it('an urgent transaction overtakes a waiting one; both commit', async () => {
    const db = await opened;
    await db.query('CREATE TABLE turns_test (n int, who text)');
    const hold = gate();
    const holding = gate();
    const holder = db.transaction(async (tx) => {
      await tx.query("INSERT INTO turns_test VALUES (1, 'holder')");
      holding.open();
      await hold.promise;
    });
    // The other two queue only once the holder has the store.
    await holding.promise;
    const stage = db.transaction(async (tx) => tx.query("INSERT INTO turns_test SELECT count(*) + 1, 'stage' FROM turns_test"));
    const append = db.transaction(async (tx) => tx.query("INSERT INTO turns_test SELECT count(*) + 1, 'append' FROM turns_test"), { urgent: true });
    hold.open();
    await Promise.all([holder, stage, append]);
    const rows = (await db.query<{ n: number; who: string }>('SELECT n, who FROM turns_test ORDER BY n')).rows;
    expect(rows).toEqual([
      { n: 1, who: 'holder' },
      { n: 2, who: 'append' },
      { n: 3, who: 'stage' },
    ]);
  });
});
