import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db, Sql } from '../shared/db/db.js';
import { openDatabase } from '../shared/db/open.js';
import { Topics } from '../shared/topics.js';
import { embeddedAcceptedEvents, LOG_TIME_MARGIN_MS } from './accepted-events.js';

let db: Db;
/** The real store, with every statement counted: how much of the log a read touched. */
let statements: string[] = [];
let counted: Db;
const T = Date.UTC(2026, 10, 1, 12, 0, 0);
const MIN = 60_000;

interface Row {
  ws: string;
  key: string;
  receivedAt: number;
  /** The log's time: a moment after received_at, and not monotonic across group commits by a few seconds. */
  appendedAt: number;
}
const row = (ws: string, key: string, receivedAt: number, appendedAt = receivedAt + 50): Row => ({ ws, key, receivedAt, appendedAt });
async function read(ws: string, from: number, to: number, opts: { take?: number; pageSize?: number } = {}): Promise<string[]> {
  const keys: string[] = [];
  for await (const e of embeddedAcceptedEvents(counted, opts.pageSize ?? 500).read(ws, from, to, new AbortController().signal)) {
    keys.push(e.idempotency_key!);
    if (opts.take !== undefined && keys.length >= opts.take) break;
  }
  return keys;
}

beforeAll(async () => {
  db = await openDatabase({ inMemory: true });
  const count = (sql: Sql): Sql => ({
    query: (text, params) => {
      statements.push(text);
      return sql.query(text, params);
    },
  });
  counted = { ...db, ...count(db), kind: db.kind, transaction: db.transaction.bind(db), close: db.close.bind(db) };
  // Hours of log in append order: two workspaces, one event a minute each, 100 of ws_a in the minute at T, and two
  // of ws_late whose appends came a few seconds out of order.
  const rows: Row[] = [];
  for (let m = -180; m <= 180; m++) rows.push(row('ws_a', `a${m}`, T + m * MIN), row('ws_b', `b${m}`, T + m * MIN));
  for (let i = 0; i < 100; i++) rows.push(row('ws_a', `burst${i}`, T + 30_000 + i));
  rows.push(row('ws_late', 'late', T - 1, T + 5_000)); // received just before `from`, appended after it
  rows.push(row('ws_late', 'inside', T + 1, T - 5_000)); // received inside, its append stamped earlier
  rows.sort((x, y) => x.receivedAt - y.receivedAt);
  await db.query(
    `INSERT INTO log_records (topic, key, value, appended_at)
     SELECT $1, r->>'k', r->'v', to_timestamp((r->>'at')::double precision / 1000)
     FROM jsonb_array_elements($2::jsonb) WITH ORDINALITY AS t(r, i) ORDER BY i`,
    [Topics.eventsRaw, JSON.stringify(rows.map((r) => ({ k: `${r.ws}:${r.key}`, at: r.appendedAt, v: { v: 1, workspace_id: r.ws, idempotency_key: r.key, received_at: r.receivedAt } })))],
  );
});
afterAll(() => db.close());

describe('embedded accepted events', () => {
  it('holds exactly the workspace\'s events received in [from, to), in log order', async () => {
    const keys = await read('ws_a', T - 2 * MIN, T + 2 * MIN);
    expect(keys).toEqual(['a-2', 'a-1', 'a0', ...Array.from({ length: 100 }, (_, i) => `burst${i}`), 'a1']);
    expect(await read('ws_b', T, T + MIN)).toEqual(['b0']);
  });

  it('takes received_at, not the log\'s time, even when the append came late', async () => {
    expect(await read('ws_late', T, T + MIN)).toEqual(['inside']);
  });

  it('reads only the part of the log around the range, a page when the reader asks', async () => {
    statements = [];
    expect(await read('ws_a', T + 10 * MIN, T + 11 * MIN)).toEqual(['a10']);
    const pages = statements.filter((s) => s.includes('value->>\'workspace_id\''));
    expect(pages).toHaveLength(2); // the page with a10, and the empty one that ends the range
    // Three hours of log found by a binary search: a handful of probes, not a scan.
    expect(statements.length).toBeLessThan(40);

    statements = [];
    expect(await read('ws_a', T, T + MIN, { take: 1, pageSize: 10 })).toEqual(['a0']);
    expect(statements.filter((s) => s.includes('value->>\'workspace_id\''))).toHaveLength(1); // the rest never read
  });

  it('finds nothing outside the log, and an empty range is empty', async () => {
    expect(await read('ws_a', T - 10 * 60 * MIN, T - 9 * 60 * MIN)).toEqual([]);
    expect(await read('ws_a', T + 10 * 60 * MIN, T + 11 * 60 * MIN)).toEqual([]);
    expect(await read('ws_a', T, T)).toEqual([]);
    expect(await read('ws_nobody', T - LOG_TIME_MARGIN_MS, T + LOG_TIME_MARGIN_MS)).toEqual([]);
  });

  // RFC 3339 reaches from year 0000 to 9999; the store's time type and JavaScript's dates hold all of it, but the
  // margin around the range once pushed such a bound past what the store parses (a 500).
  it.each([
    { name: 'the first and last times RFC 3339 can write', from: '0000-01-01T00:00:00Z', to: '9999-12-31T23:59:59.999Z' },
    { name: 'year 0001 and year 9999', from: '0001-01-01T00:00:00Z', to: '9999-12-31T23:59:59Z' },
    { name: 'an offset that moves the start into year 0000', from: '0001-01-01T00:00:00+14:00', to: '9999-12-31T23:59:59-14:00' },
  ])('a range at the edge of time ($name) reads the whole log', async ({ from, to }) => {
    const keys = await read('ws_b', Date.parse(from), Date.parse(to));
    expect(keys).toHaveLength(361);
  });
});
