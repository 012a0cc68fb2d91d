import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../shared/db/db.js';
import { openDatabase } from '../../shared/db/open.js';
import { Topics } from '../../shared/topics.js';
import { purgeExpired } from './retention.js';

let db: Db;
beforeAll(async () => {
  db = await openDatabase({ inMemory: true });
});
afterAll(() => db.close());

describe('embedded log retention', () => {
  it('deletes records older than their topic retention, keeps the rest and the offsets', async () => {
    const day = 24 * 3600_000;
    const now = Date.now();
    const insert = (topic: string, ageMs: number, n: number) =>
      db.query(
        `INSERT INTO log_records (topic, key, value, appended_at)
         SELECT $1, 'k' || g, '{}'::jsonb, $2::timestamptz FROM generate_series(1, $3) AS g`,
        [topic, new Date(now - ageMs).toISOString(), n],
      );
    await insert(Topics.eventsRaw, 8 * day, 6_000); // older than 7 days: more than one chunk
    await insert(Topics.eventsRaw, 1 * day, 10);
    await insert(Topics.eventsDlq, 8 * day, 5); // the DLQ keeps 30 days
    const maxBefore = await db.query<{ m: unknown }>(`SELECT max("offset") AS m FROM log_records WHERE topic = $1`, [Topics.eventsRaw]);

    expect(await purgeExpired(db, now)).toBe(6_000);

    const left = await db.query<{ topic: string; n: unknown }>('SELECT topic, count(*) AS n FROM log_records GROUP BY topic ORDER BY topic');
    expect(left.rows.map((r) => [r.topic, Number(r.n)])).toEqual([
      [Topics.eventsDlq, 5],
      [Topics.eventsRaw, 10],
    ]);
    const maxAfter = await db.query<{ m: unknown }>(`SELECT max("offset") AS m FROM log_records WHERE topic = $1`, [Topics.eventsRaw]);
    expect(Number(maxAfter.rows[0]!.m)).toBe(Number(maxBefore.rows[0]!.m));
    expect(await purgeExpired(db, now)).toBe(0);
  });
});
