/**
 * Gauges read from the database (and a Kafka probe) when Prometheus scrapes, not maintained by the code paths:
 * they answer "how much is waiting, how old is it, is the dependency there" even when the loop that would have
 * updated them is stuck. Each is one cheap query; a refresh runs at most once a second, however often it is
 * scraped, and never longer than SCRAPE_BUDGET_MS (what did not answer keeps its last value; the probes say 0).
 *
 * NOTE: these gauges describe shared state (the database), so every process exports the same values: aggregate
 * them with max(), not sum(), across instances.
 */
import { Gauge } from 'prom-client';
import type { Db } from './db/db.js';
import { toNumber } from './db/db.js';
import { consumerLag, dependencyUp, registry } from './metrics.js';
import { Topics } from './topics.js';

export const connectionsByState = new Gauge({
  name: 'forwarder_connections',
  help: 'Platform connections by status (connected, needs_reauth, disconnected)',
  labelNames: ['status'] as const,
  registers: [registry],
});

export const tokenExpiry = new Gauge({
  name: 'forwarder_token_expiry_seconds',
  help: 'Seconds until the soonest expiry among connected connections, by token (access, refresh); negative: already expired; absent: none expires',
  labelNames: ['token'] as const,
  registers: [registry],
});

export const deadLetters = new Gauge({
  name: 'dead_letters',
  help: 'Dead letters waiting for an operator (not redriven or discarded), by stage: dedupe, enrich, forwarder; both runtimes',
  labelNames: ['stage'] as const,
  registers: [registry],
});

export const deadLetterOldestAge = new Gauge({
  name: 'dead_letters_oldest_age_seconds',
  help: 'Age of the oldest dead letter held, by stage (0 when none)',
  labelNames: ['stage'] as const,
  registers: [registry],
});

/** A consumer whose lag is read from the embedded log: its group and input topic. */
export interface EmbeddedConsumer {
  readonly group: string;
  readonly topic: string;
}

export interface ScrapeSources {
  readonly db: Db;
  /** Set on the embedded runtime: the stages (and the forwarder's intake) whose lag it holds. */
  readonly embedded?: { readonly consumers: readonly EmbeddedConsumer[] };
  /** Set on the Kafka runtime: a cheap reachability probe of the cluster. */
  readonly kafkaProbe?: (timeoutMs: number) => Promise<boolean>;
  /** Gauges of the floors above (replay jobs, say), read from the same database when Postgres answers. */
  readonly readers?: ReadonlyArray<(db: Db) => Promise<void>>;
}

const SCRAPE_BUDGET_MS = 2_000;
const PROBE_TIMEOUT_MS = 1_000;
const MIN_INTERVAL_MS = 1_000;
/** Lag is counted exactly up to this many records per consumer (a bounded index scan); above, it reads this cap. */
export const EMBEDDED_LAG_CAP = 1_000_000;
const PIPELINE_STAGES = ['dedupe', 'enrich'];
const FORWARDER_STAGE = 'forwarder';

let sources: ScrapeSources | undefined;
let last: { at: number; done: Promise<void> } | undefined;

/** Registers what the scrape-time gauges read (main.ts, once the service started). */
export function watchForScrape(s: ScrapeSources): void {
  sources = s;
  last = undefined;
}

/** Brings the scrape-time gauges up to date; the metrics server awaits it before rendering `/metrics`. */
export function refreshScrapeGauges(now = Date.now()): Promise<void> {
  if (!sources) return Promise.resolve();
  if (last && now - last.at < MIN_INTERVAL_MS) return last.done;
  const s = sources;
  const done = Promise.race([refresh(s), sleep(SCRAPE_BUDGET_MS)]).catch(() => undefined);
  last = { at: now, done };
  return done;
}

async function refresh(s: ScrapeSources): Promise<void> {
  const kafka = s.kafkaProbe
    ? withTimeout(s.kafkaProbe(PROBE_TIMEOUT_MS), PROBE_TIMEOUT_MS).then((ok) => dependencyUp.set({ dependency: 'kafka' }, ok ? 1 : 0))
    : Promise.resolve();
  const pgUp = await withTimeout(
    s.db.query('SELECT 1').then(() => true),
    PROBE_TIMEOUT_MS,
  );
  dependencyUp.set({ dependency: 'postgres' }, pgUp ? 1 : 0);
  if (pgUp) {
    await readConnections(s.db);
    await readDeadLetters(s.db);
    if (s.embedded) await readEmbeddedLag(s.db, s.embedded.consumers);
    for (const read of s.readers ?? []) await read(s.db);
  }
  await kafka;
}

async function readConnections(db: Db): Promise<void> {
  const r = await db.query<{ status: string; n: unknown; access: unknown; refresh: unknown }>(
    `SELECT status, count(*) AS n,
            extract(epoch FROM min(access_expires_at) FILTER (WHERE status = 'connected') - now()) AS access,
            extract(epoch FROM min(refresh_expires_at) FILTER (WHERE status = 'connected') - now()) AS refresh
     FROM connections GROUP BY status`,
  );
  const counts: Record<string, number> = { connected: 0, needs_reauth: 0, disconnected: 0 };
  let access: number | undefined;
  let refresh: number | undefined;
  for (const row of r.rows) {
    counts[row.status] = toNumber(row.n);
    if (row.access !== null && row.access !== undefined) access = toNumber(row.access);
    if (row.refresh !== null && row.refresh !== undefined) refresh = toNumber(row.refresh);
  }
  for (const [status, n] of Object.entries(counts)) connectionsByState.set({ status }, n);
  setOrRemove(tokenExpiry, { token: 'access' }, access);
  setOrRemove(tokenExpiry, { token: 'refresh' }, refresh);
}

async function readDeadLetters(db: Db): Promise<void> {
  // The dead_letters table holds every letter waiting for an operator, of every stage, on both runtimes
  // (domain/dead-letter.ts); a redriven or discarded letter is no longer held.
  const r = await db.query<{ stage: string; n: unknown; age: unknown }>(
    `SELECT stage, count(*) AS n, extract(epoch FROM now() - min(first_failed_at)) AS age
     FROM dead_letters WHERE status = 'dead' GROUP BY stage`,
  );
  const seen = new Map(r.rows.map((row) => [row.stage, row]));
  for (const stage of new Set([...PIPELINE_STAGES, FORWARDER_STAGE, ...seen.keys()])) {
    const row = seen.get(stage);
    deadLetters.set({ stage }, row ? toNumber(row.n) : 0);
    deadLetterOldestAge.set({ stage }, row ? Math.max(0, toNumber(row.age)) : 0);
  }
}

async function readEmbeddedLag(db: Db, consumers: readonly EmbeddedConsumer[]): Promise<void> {
  for (const c of consumers) {
    const r = await db.query<{ lag: unknown }>(
      `SELECT count(*) AS lag FROM (
         SELECT 1 FROM log_records
         WHERE topic = $2 AND "offset" > COALESCE((SELECT "offset" FROM consumer_offsets WHERE group_id = $1 AND topic = $2), 0)
         LIMIT $3) AS pending`,
      [c.group, c.topic, EMBEDDED_LAG_CAP],
    );
    consumerLag.set({ stage: c.group, topic: c.topic, partition: '0' }, toNumber(r.rows[0]?.lag ?? 0));
  }
}

function setOrRemove(g: Gauge<'token'>, labels: { token: string }, v: number | undefined): void {
  if (v === undefined) g.remove(labels);
  else g.set(labels, v);
}

function withTimeout(p: Promise<boolean>, ms: number): Promise<boolean> {
  return Promise.race([p.catch(() => false), sleep(ms).then(() => false)]);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref());
}
