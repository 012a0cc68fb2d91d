/**
 * The embedded store's turns: the gateway's appends (urgent) go before waiting stage batches, and a batch
 * is never passed over for longer than the fairness bound.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from './open.js';
import { preparedStatementCases } from '../../../test/helpers/prepared-cases.js';
import type { Db } from './db.js';
import { embeddedStoreBusy, embeddedStoreStatements } from '../metrics.js';
import { FairTaskQueue } from './pglite.js';
import { StatementNames } from './prepared-statements.js';

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

  it("counts its thread's busy time and the statements it ran (embedded_store_busy_seconds_total, embedded_store_statements_total)", async () => {
    const db = await opened;
    const started = performance.now();
    // The counter moves with each answer: this one's, sent after `started`, is where the busy time counted below begins.
    await db.query('SELECT 1');
    const busyBefore = (await embeddedStoreBusy.get()).values[0]!.value;
    const statementsBefore = (await embeddedStoreStatements.get()).values[0]!.value;
    // generate_series over 200,000 rows keeps the thread busy for a measurable while.
    await db.query('SELECT count(*) FROM generate_series(1, 200000)');
    await db.transaction(async (tx) => tx.query('SELECT $1::int AS n', [1]));
    const elapsedSec = (performance.now() - started) / 1000;
    const busy = (await embeddedStoreBusy.get()).values[0]!.value - busyBefore;
    // The query, then BEGIN, the statement and COMMIT.
    expect((await embeddedStoreStatements.get()).values[0]!.value - statementsBefore).toBe(4);
    expect(busy).toBeGreaterThan(0);
    // Busy time of the thread during these statements: never more than the time they took.
    expect(busy).toBeLessThanOrEqual(elapsedSec);
  });

  it('does not count closing a store as a statement', async () => {
    const other = await openDatabase({ inMemory: true });
    const before = (await embeddedStoreStatements.get()).values[0]!.value;
    await other.close();
    expect((await embeddedStoreStatements.get()).values[0]!.value).toBe(before);
  });
});

describe('statements with parameters on the embedded store (named, prepared once)', () => {
  let db: Db;
  beforeAll(async () => {
    db = await openDatabase({ inMemory: true });
    await db.query('CREATE TABLE prepared_t (a int PRIMARY KEY, b text, at timestamptz, doc json)');
    await db.query("INSERT INTO prepared_t (a, b) VALUES (1, 'one'), (2, 'two')");
  });
  afterAll(async () => db?.close());

  preparedStatementCases(() => db);

  it('parameters of every type are written and read as an unnamed statement would', async () => {
    const at = new Date('2026-11-28T10:00:00.123Z');
    const insert = await db.query('INSERT INTO prepared_t (a, b, at, doc) VALUES ($1, $2, $3, $4), ($5, $6, $7, $8)', [3, null, at, JSON.stringify({ k: [1] }), 4, undefined, null, null]);
    expect(insert.affectedRows).toBe(2);
    expect((await db.query('SELECT a, b, at, doc FROM prepared_t WHERE a BETWEEN $1 AND 4 ORDER BY a', [3])).rows).toEqual([
      { a: 3, b: null, at, doc: { k: [1] } },
      { a: 4, b: null, at: null, doc: null },
    ]);
  });

  it("an answer far larger than the engine's output buffer comes back whole, multi-byte text included, with its counts", async () => {
    // ~360 KB a value of 1- to 4-byte characters, a quote and a backslash: parameters and rows each cross many 8 KB
    // chunks of the engine's output.
    const big = 'aé€😀"\\'.repeat(30_000);
    await db.query('CREATE TABLE prepared_big (a int PRIMARY KEY, t text, doc json)');
    const insert = await db.query('INSERT INTO prepared_big SELECT g, $1, $2::json FROM generate_series(1, $3::int) g', [big, JSON.stringify({ s: big }), 5]);
    expect(insert.affectedRows).toBe(5);
    const rows = (await db.query<{ a: number; t: string; doc: { s: string } }>('SELECT a, t, doc FROM prepared_big WHERE a <= $1 ORDER BY a', [5])).rows;
    expect(rows.map((r) => r.a)).toEqual([1, 2, 3, 4, 5]);
    for (const r of rows) {
      expect(r.t === big && r.doc.s === big).toBe(true);
    }
    const update = await db.query('UPDATE prepared_big SET t = $1 WHERE a > $2 RETURNING a', ['short', 3]);
    expect(update.rows).toEqual([{ a: 4 }, { a: 5 }]);
    expect(update.affectedRows).toBe(2);
    expect((await db.query('DELETE FROM prepared_big WHERE a = ANY($1::int[])', [[1, 2, 9]])).affectedRows).toBe(2);
    expect((await db.query('SELECT a FROM prepared_big WHERE a > $1', [9])).rows).toEqual([]);
    // Rows smaller than the engine's 8 KB output buffer but not dividing it: most chunks end inside a row.
    const many = (await db.query<{ a: number; t: string }>('SELECT g AS a, repeat($1, 3001) AS t FROM generate_series(1, 300) g', ['é'])).rows;
    expect(many.every((r, i) => r.a === i + 1 && r.t === 'é'.repeat(3001))).toBe(true);
  });

  it('a statement without parameters (the simple protocol) answers typed values and counts as one with them would', async () => {
    const r = await db.query<{ n: number; at: Date; doc: unknown; none: null }>(
      `SELECT 2::int AS n, '2026-11-28T10:00:00.123Z'::timestamptz AS at, '{"k":[1]}'::json AS doc, NULL::text AS none`,
    );
    expect(r.rows).toEqual([{ n: 2, at: new Date('2026-11-28T10:00:00.123Z'), doc: { k: [1] }, none: null }]);
    await db.query('CREATE TABLE prepared_simple (a int)');
    expect((await db.query('INSERT INTO prepared_simple SELECT generate_series(1, 3)')).affectedRows).toBe(3);
    expect((await db.query('UPDATE prepared_simple SET a = a + 10 WHERE a > 1')).affectedRows).toBe(2);
    await expect(db.query('SELECT * FROM prepared_nowhere')).rejects.toMatchObject({ code: '42P01' });
  });

  it('a failed statement reports what Postgres said: code, constraint, detail; the next one runs', async () => {
    const duplicate = db.query('INSERT INTO prepared_t (a, b) VALUES ($1, $2)', [1, 'again']);
    await expect(duplicate).rejects.toMatchObject({ code: '23505', constraint: 'prepared_t_pkey', detail: 'Key (a)=(1) already exists.' });
    expect((await db.query('SELECT b FROM prepared_t WHERE a = $1', [1])).rows).toEqual([{ b: 'one' }]);
  });

  it("a transaction's statements sent together are answered each as its own", async () => {
    const answers = await db.transaction((tx) => Promise.all([1, 2, 1, 2].map((a) => tx.query<{ b: string }>('SELECT b FROM prepared_t WHERE a = $1', [a]))));
    expect(answers.map((r) => r.rows[0]!.b)).toEqual(['one', 'two', 'one', 'two']);
  });

  it('a `SELECT *` prepared before a migration added a column answers with it: at once alone, after one failure in a transaction', async () => {
    await db.query('CREATE TABLE prepared_star (a int PRIMARY KEY, b text)');
    await db.query("INSERT INTO prepared_star VALUES (1, 'one')");
    const star = 'SELECT * FROM prepared_star WHERE a = $1';
    expect((await db.query(star, [1])).rows).toEqual([{ a: 1, b: 'one' }]);
    await db.query("ALTER TABLE prepared_star ADD COLUMN c text DEFAULT 'new'");
    expect((await db.query(star, [1])).rows).toEqual([{ a: 1, b: 'one', c: 'new' }]);

    const inTx = 'SELECT * FROM prepared_star WHERE a = $1 AND b IS NOT NULL';
    expect((await db.transaction((tx) => tx.query(inTx, [1]))).rows).toEqual([{ a: 1, b: 'one', c: 'new' }]);
    await db.query("ALTER TABLE prepared_star ADD COLUMN d text DEFAULT 'newer'");
    await expect(db.transaction((tx) => tx.query(inTx, [1]))).rejects.toThrow(/cached plan must not change result type/);
    expect((await db.transaction((tx) => tx.query(inTx, [1]))).rows).toEqual([{ a: 1, b: 'one', c: 'new', d: 'newer' }]);
  });

  it(`more than ${StatementNames.MAX_NAMED} texts: the rest run unnamed and answer the same`, async () => {
    for (let i = 0; i < StatementNames.MAX_NAMED + 20; i++) {
      expect((await db.query<{ n: number }>(`SELECT $1::int + ${i} AS n`, [1])).rows).toEqual([{ n: 1 + i }]);
    }
    const named = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_prepared_statements')).rows[0]!.n;
    expect(named).toBeLessThanOrEqual(StatementNames.MAX_NAMED);
  });
});
