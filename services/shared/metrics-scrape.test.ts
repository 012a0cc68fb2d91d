/**
 * The scrape-time gauges read a real store (PGlite in memory): dead letters per stage and the oldest's age, the
 * embedded lag per consumer, connections by status and the soonest token expiries, the Postgres probe.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from './db/db.js';
import { openDatabase } from './db/open.js';
import { registry } from './metrics.js';
import { watchForScrape, refreshScrapeGauges } from './metrics-scrape.js';
import { appendInTransaction } from '../stream/embedded/log.js';
import { commitOffset } from '../stream/embedded/offsets.js';
import { recordDeadLetters, type DeadLetterEntry } from '../domain/dead-letter.js';
import { Topics, type TopicName } from './topics.js';

let db: Db;
let clock = Date.now();

/** A gauge's value for labels, as Prometheus would read it after a scrape-time refresh. */
async function gauge(name: string, labels: Record<string, string>): Promise<number | undefined> {
  clock += 2_000; // past the 1 s coalescing of refreshes
  await refreshScrapeGauges(clock);
  const m = await registry.getSingleMetric(name)!.get();
  return m.values.find((v) => Object.entries(labels).every(([k, want]) => String((v.labels as Record<string, unknown>)[k]) === want))?.value;
}

async function append(topic: TopicName, values: unknown[]): Promise<void> {
  await db.transaction((tx) => appendInTransaction(tx, new Map([[topic, values.map((value, i) => ({ key: `k${i}`, value }))]])));
}

async function workspace(id: string): Promise<void> {
  await db.query('INSERT INTO workspaces (id, name, plan) VALUES ($1, $1, $2)', [id, 'free']);
}

beforeAll(async () => {
  db = await openDatabase({ inMemory: true });
  watchForScrape({
    db,
    embedded: {
      consumers: [
        { group: 'dedupe', topic: Topics.eventsRaw },
        { group: 'forwarder', topic: Topics.conversionsReady },
      ],
    },
  });
});
afterAll(() => db.close());

const letter = (over: Partial<DeadLetterEntry>): DeadLetterEntry => ({
  workspaceId: 'ws_a',
  stage: 'dedupe',
  topic: Topics.eventsDlq,
  origin: 'ws_a:k',
  source: 'events.raw/0/1',
  eventId: null,
  reason: 'processing_failed',
  error: 'boom',
  value: {},
  failedAt: Date.now(),
  ...over,
});

describe('scrape-time gauges', () => {
  it('start at zero on an empty store, the probe says Postgres is up', async () => {
    expect(await gauge('dependency_up', { dependency: 'postgres' })).toBe(1);
    for (const stage of ['dedupe', 'enrich', 'forwarder']) {
      expect(await gauge('dead_letters', { stage })).toBe(0);
      expect(await gauge('dead_letters_oldest_age_seconds', { stage })).toBe(0);
    }
    expect(await gauge('consumer_lag_records', { stage: 'dedupe', topic: Topics.eventsRaw, partition: '0' })).toBe(0);
    expect(await gauge('forwarder_connections', { status: 'needs_reauth' })).toBe(0);
    expect(await gauge('forwarder_token_expiry_seconds', { token: 'access' })).toBeUndefined();
  });

  it('count dead letters per stage with the age of the oldest', async () => {
    const hourAgo = Date.now() - 3_600_000;
    await recordDeadLetters(db, [
      letter({ stage: 'enrich', origin: 'ws_a:1', failedAt: hourAgo }),
      letter({ stage: 'enrich', origin: 'ws_a:2' }),
      letter({ stage: 'dedupe', origin: 'ws_a:3' }),
      letter({ stage: 'forwarder', topic: Topics.conversionsDlq, origin: 'evt-1' }),
      letter({ stage: 'dedupe', origin: 'ws_a:4' }),
    ]);
    // Redriven: no longer held.
    await db.query(`UPDATE dead_letters SET status = 'redriven' WHERE origin = 'ws_a:4'`);
    expect(await gauge('dead_letters', { stage: 'enrich' })).toBe(2);
    expect(await gauge('dead_letters', { stage: 'dedupe' })).toBe(1);
    expect(await gauge('dead_letters', { stage: 'forwarder' })).toBe(1);
    const age = (await gauge('dead_letters_oldest_age_seconds', { stage: 'enrich' }))!;
    expect(age).toBeGreaterThanOrEqual(3600);
    expect(age).toBeLessThan(3700);
  });

  it('read each consumer\'s lag from its committed offset (none committed yet: the whole topic)', async () => {
    await append(Topics.eventsRaw, [1, 2, 3, 4, 5]);
    expect(await gauge('consumer_lag_records', { stage: 'dedupe', topic: Topics.eventsRaw, partition: '0' })).toBe(5);
    const offsets = await db.query<{ offset: unknown }>('SELECT "offset" FROM log_records WHERE topic = $1 ORDER BY "offset"', [Topics.eventsRaw]);
    await commitOffset(db, 'dedupe', Topics.eventsRaw, Number(offsets.rows[2]!.offset));
    expect(await gauge('consumer_lag_records', { stage: 'dedupe', topic: Topics.eventsRaw, partition: '0' })).toBe(2);
    expect(await gauge('consumer_lag_records', { stage: 'forwarder', topic: Topics.conversionsReady, partition: '0' })).toBe(0);
  });

  it('count connections by status and the soonest expiries among the connected ones only', async () => {
    await workspace('ws_a');
    await workspace('ws_b');
    await workspace('ws_c');
    await db.query(
      `INSERT INTO connections (workspace_id, status, access_expires_at, refresh_expires_at) VALUES
         ('ws_a', 'connected', now() + interval '10 minutes', now() + interval '30 days'),
         ('ws_b', 'connected', now() + interval '2 hours', now() + interval '3 days'),
         ('ws_c', 'needs_reauth', now() - interval '1 day', now() - interval '1 day')`,
    );
    expect(await gauge('forwarder_connections', { status: 'connected' })).toBe(2);
    expect(await gauge('forwarder_connections', { status: 'needs_reauth' })).toBe(1);
    expect(await gauge('forwarder_connections', { status: 'disconnected' })).toBe(0);
    const access = (await gauge('forwarder_token_expiry_seconds', { token: 'access' }))!;
    expect(access).toBeGreaterThan(590);
    expect(access).toBeLessThanOrEqual(600);
    const refresh = (await gauge('forwarder_token_expiry_seconds', { token: 'refresh' }))!;
    expect(refresh).toBeGreaterThan(3 * 86_400 - 10);
    expect(refresh).toBeLessThanOrEqual(3 * 86_400);
  });

  it('coalesce refreshes: two scrapes within a second read the store once', async () => {
    await refreshScrapeGauges(clock + 5_000);
    await append(Topics.eventsRaw, [6]);
    await refreshScrapeGauges(clock + 5_500);
    const m = await registry.getSingleMetric('consumer_lag_records')!.get();
    expect(m.values.find((v) => v.labels.stage === 'dedupe')?.value).toBe(2);
    clock += 5_500;
    expect(await gauge('consumer_lag_records', { stage: 'dedupe', topic: Topics.eventsRaw, partition: '0' })).toBe(3);
  });

  it('report Postgres down when the probe fails (bad input: a closed store)', async () => {
    const closed = await openDatabase({ inMemory: true });
    await closed.close();
    watchForScrape({ db: closed });
    try {
      expect(await gauge('dependency_up', { dependency: 'postgres' })).toBe(0);
    } finally {
      watchForScrape({ db, embedded: { consumers: [{ group: 'dedupe', topic: Topics.eventsRaw }] } });
    }
  });
});

describe('dead letter rows (recordDeadLetters)', () => {
  const row = async (origin: string) =>
    (await db.query<{ attempts: number; status: string; source: string; error: string }>('SELECT attempts, status, source, error FROM dead_letters WHERE origin = $1', [origin])).rows;

  it('a batch written again from the same source changes nothing; the same record failing from a new source raises attempts and is dead again', async () => {
    await recordDeadLetters(db, [letter({ origin: 'ws_a:again', source: 'events.raw/0/10' })]);
    await recordDeadLetters(db, [letter({ origin: 'ws_a:again', source: 'events.raw/0/10' })]);
    expect(await row('ws_a:again')).toEqual([{ attempts: 1, status: 'dead', source: 'events.raw/0/10', error: 'boom' }]);
    await db.query(`UPDATE dead_letters SET status = 'redriven' WHERE origin = 'ws_a:again'`);
    await recordDeadLetters(db, [letter({ origin: 'ws_a:again', source: 'events.raw/0/99', error: 'boom again' })]);
    expect(await row('ws_a:again')).toEqual([{ attempts: 2, status: 'dead', source: 'events.raw/0/99', error: 'boom again' }]);
  });

  it('keeps one row per origin within one statement, and workspaces apart', async () => {
    await recordDeadLetters(db, [
      letter({ origin: 'ws_a:twice', source: 's1' }),
      letter({ origin: 'ws_a:twice', source: 's2' }),
      letter({ workspaceId: 'ws_b', origin: 'ws_a:twice', source: 's1' }),
    ]);
    const rows = await db.query<{ workspace_id: string; attempts: number }>("SELECT workspace_id, attempts FROM dead_letters WHERE origin = 'ws_a:twice' ORDER BY workspace_id");
    expect(rows.rows).toEqual([{ workspace_id: 'ws_a', attempts: 1 }, { workspace_id: 'ws_b', attempts: 1 }]);
  });
});
