/**
 * The embedded store's own vacuum (PGlite has no autovacuum): which tables a pass takes, in which order, within its
 * budget, and that it reclaims what updates left behind.
 */
import { describe, expect, it, vi } from 'vitest';
import { inMemoryLog } from '../../../test/helpers/embedded-log.js';
import { DEFAULT_VACUUM_RULES, vacuumDue, type Vacuumed } from './vacuum.js';

const store = inMemoryLog();

const dead = async (table: string): Promise<number> =>
  Number((await store.db.query<{ n: unknown }>('SELECT n_dead_tup AS n FROM pg_stat_user_tables WHERE relname = $1', [table])).rows[0]?.n ?? 0);

/** Writes `rows` entries of a store, then rewrites each `times` times: `rows × times` dead versions. */
async function churn(name: string, rows: number, times: number): Promise<void> {
  const keys = Array.from({ length: rows }, (_, i) => `${name}:${i}`);
  for (let t = 0; t <= times; t++) {
    await store.db.query(
      `INSERT INTO state_store (store, key, value) SELECT $1, k, json_build_object('t', $3::int) FROM unnest($2::text[]) AS k
       ON CONFLICT (store, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()`,
      [name, keys, t],
    );
  }
}

/** A pass, once the statistics have counted what the test did (they are flushed within a second). */
async function passWhenDue(rules = DEFAULT_VACUUM_RULES, table = 'state_store'): Promise<Vacuumed[]> {
  let done: Vacuumed[] = [];
  await vi.waitFor(async () => {
    done = await vacuumDue(store.db, rules);
    expect(done.map((v) => v.table)).toContain(table);
  }, { timeout: 5_000, interval: 200 });
  return done;
}

describe('the embedded store vacuum', () => {
  it('vacuums a table whose dead versions are over autovacuum\'s threshold, and reclaims them', async () => {
    await churn('vac-1', 200, 2); // 400 dead versions, over 50 + 20% of 200 live
    const done = await passWhenDue();
    expect(done.find((v) => v.table === 'state_store')).toMatchObject({ wraparound: false });
    expect(done.find((v) => v.table === 'state_store')!.dead).toBeGreaterThanOrEqual(400);
    await vi.waitFor(async () => expect(await dead('state_store')).toBe(0), { timeout: 5_000, interval: 200 });
    // Nothing left to do: the next pass leaves it.
    expect((await vacuumDue(store.db)).map((v) => v.table)).not.toContain('state_store');
  });

  it('leaves a table under the threshold', async () => {
    await churn('vac-2', 400, 0);
    await churn('vac-2', 40, 1); // 40 dead versions among 640 live rows: under 50 + 20%
    // Once the statistics count them (a pass before that would leave the table for want of numbers, not of dead rows).
    await vi.waitFor(async () => expect(await dead('state_store')).toBeGreaterThanOrEqual(40), { timeout: 5_000, interval: 200 });
    expect((await vacuumDue(store.db)).map((v) => v.table)).not.toContain('state_store');
    expect(await dead('state_store')).toBeGreaterThanOrEqual(40);
  });

  it('takes the table with most dead versions first, and one at least whatever the budget', async () => {
    await churn('vac-3', 300, 3);
    await store.db.query(`CREATE TABLE vacuum_probe (id int PRIMARY KEY, n int)`);
    await store.db.query(`INSERT INTO vacuum_probe SELECT g, 0 FROM generate_series(1, 100) g`);
    for (let i = 0; i < 2; i++) await store.db.query('UPDATE vacuum_probe SET n = n + 1');
    await vi.waitFor(async () => expect(await dead('vacuum_probe')).toBeGreaterThanOrEqual(200), { timeout: 5_000, interval: 200 });
    const done = await passWhenDue({ ...DEFAULT_VACUUM_RULES, budgetMs: 0 });
    expect(done.map((v) => v.table)).toEqual(['state_store']);
    const next = await passWhenDue({ ...DEFAULT_VACUUM_RULES, budgetMs: 0 }, 'vacuum_probe');
    expect(next.map((v) => v.table)).toEqual(['vacuum_probe']);
  });

  it('takes tables whose transaction ids are too old first, dead versions or not (anti-wraparound)', async () => {
    await churn('vac-4', 200, 2);
    // Every table of this store is older than one transaction: all are due for their age, and marked so.
    const done = await passWhenDue({ ...DEFAULT_VACUUM_RULES, freezeMaxAge: 1, budgetMs: 60_000 });
    expect(done.length).toBeGreaterThan(5);
    expect(done.every((v) => v.wraparound)).toBe(true);
    expect(done.map((v) => v.table)).toEqual(expect.arrayContaining(['log_records', 'consumer_offsets', 'state_store']));
  });
});
