/**
 * Retention of the stores that hold personal or event data (docs/privacy.md, "What is stored and for how long"):
 * a sweep every RETENTION_SWEEP_INTERVAL_MS deletes what outlived its store's retention, in chunks, and measures the
 * age of each store's oldest entry (privacy_oldest_entry_age_seconds). Stores whose retention another part of the
 * runtime already enforces are measured here, not deleted twice: the sent ledger, the delivery records and the outbox (the
 * forwarder: FORWARDER_LEDGER_RETENTION_HOURS, FORWARDER_PARK_MAX_HOURS) and the raw log (the embedded log's retention).
 */
import type { Db } from '../shared/db/db.js';
import type { PrivacyConfig } from '../shared/config.js';
import type { Logger } from '../shared/logger.js';
import { Topics } from '../shared/topics.js';
import { oldestEntryAge, retentionDeleted } from './metrics.js';

const CHUNK = 5_000;
const DLQ_TOPICS = [Topics.eventsDlq, Topics.conversionsDlq];

/** Deletes a statement's rows chunk by chunk (the statement deletes at most CHUNK rows and returns one row each). */
async function purge(db: Db, statement: string, values: unknown[]): Promise<number> {
  let total = 0;
  for (;;) {
    const n = (await db.query(statement, values)).rows.length;
    total += n;
    if (n < CHUNK) return total;
  }
}

/** A store whose entries expire by age: its table, primary key columns, age column and retention. */
interface Expiring {
  readonly store: string;
  readonly table: string;
  readonly key: readonly string[];
  readonly age: string;
  /** Narrows the table to the store's rows (the dead letters are two topics of the log). */
  readonly only?: string;
  readonly retentionMs: (cfg: PrivacyConfig) => number;
}

const EXPIRING: readonly Expiring[] = [
  { store: 'identity_graph', table: 'identity_nodes', key: ['node_id'], age: 'last_seen_at', retentionMs: (c) => c.graphRetentionMs },
  {
    store: 'identity_links',
    table: 'identity_edges',
    key: ['workspace_id', 'key_mode', 'a_kind', 'a_value', 'b_kind', 'b_value'],
    age: 'last_seen_at',
    retentionMs: (c) => c.graphRetentionMs,
  },
  {
    store: 'dead_letters',
    table: 'log_records',
    key: ['topic', '"offset"'],
    age: 'appended_at',
    only: `topic IN (${DLQ_TOPICS.map((t) => `'${t}'`).join(', ')})`,
    retentionMs: (c) => c.deadLetterRetentionMs,
  },
  { store: 'audit_log', table: 'audit_log', key: ['id'], age: 'at', retentionMs: (c) => c.auditRetentionMs },
  {
    store: 'why_records',
    table: 'conversion_explanations',
    key: ['workspace_id', 'key_mode', 'event_id'],
    age: 'created_at',
    retentionMs: (c) => c.explanationRetentionMs,
  },
];

const cutoff = (now: number, ms: number): string => new Date(now - ms).toISOString();

export async function sweepRetention(db: Db, cfg: PrivacyConfig, now = Date.now()): Promise<Record<string, number>> {
  const deleted: Record<string, number> = {};
  for (const e of EXPIRING) {
    const key = e.key.join(', ');
    deleted[e.store] = await purge(
      db,
      `DELETE FROM ${e.table} WHERE (${key}) IN
         (SELECT ${key} FROM ${e.table} WHERE ${e.age} < $1 ${e.only ? `AND ${e.only}` : ''} LIMIT ${CHUNK}) RETURNING 1`,
      [cutoff(now, e.retentionMs(cfg))],
    );
  }
  // An erasure record is audit too; its redaction list goes with it (long after the raw log it redacts has expired).
  deleted.erasures = await purge(
    db,
    `WITH gone AS (DELETE FROM erasures WHERE id IN (SELECT id FROM erasures WHERE requested_at < $1 AND status IN ('done', 'failed') LIMIT ${CHUNK}) RETURNING id),
          list AS (DELETE FROM erased_identifiers WHERE erasure_id IN (SELECT id FROM gone) RETURNING 1)
     SELECT id FROM gone`,
    [cutoff(now, cfg.auditRetentionMs)],
  );
  for (const [store, n] of Object.entries(deleted)) if (n > 0) retentionDeleted.inc({ store }, n);
  await measureOldest(db, now);
  return deleted;
}

/** Sets privacy_oldest_entry_age_seconds for every store (one statement). */
export async function measureOldest(db: Db, now = Date.now()): Promise<Record<string, number>> {
  const age = (expr: string) => `(SELECT (extract(epoch from $1::timestamptz - ${expr}))::float8)`;
  const r = await db.query<Record<string, number | null>>(
    `SELECT ${age('(SELECT min(last_seen_at) FROM identity_nodes)')} AS identity_graph,
            ${age('(SELECT min(last_seen_at) FROM identity_edges)')} AS identity_links,
            ${age('(SELECT min(sent_at) FROM forward_sent)')} AS sent_ledger,
            ${age('(SELECT min(enqueued_at) FROM forward_outbox)')} AS outbox,
            ${age('(SELECT min(attempted_at) FROM deliveries)')} AS deliveries,
            ${age('(SELECT min(appended_at) FROM log_records WHERE topic = ANY($2::text[]))')} AS dead_letters,
            ${age('(SELECT min(at) FROM audit_log)')} AS audit_log,
            ${age('(SELECT min(requested_at) FROM erasures)')} AS erasures,
            ${age('(SELECT min(created_at) FROM conversion_explanations)')} AS why_records,
            ${age(`(SELECT appended_at FROM log_records WHERE topic = $3 ORDER BY "offset" LIMIT 1)`)} AS raw_log`,
    [new Date(now).toISOString(), DLQ_TOPICS, Topics.eventsRaw],
  );
  const out: Record<string, number> = {};
  for (const [store, v] of Object.entries(r.rows[0]!)) {
    out[store] = v === null ? 0 : Math.max(0, Number(v));
    oldestEntryAge.set({ store }, out[store]!);
  }
  return out;
}

/** Sweeps at start and every `intervalMs` until stopped. */
export function startRetentionSweeper(db: Db, cfg: PrivacyConfig, logger: Logger): { stop(): Promise<void> } {
  let running: Promise<void> = Promise.resolve();
  const run = () => {
    running = sweepRetention(db, cfg)
      .then((deleted) => {
        const total = Object.values(deleted).reduce((a, n) => a + n, 0);
        if (total > 0) logger.info({ deleted }, 'privacy retention: deleted expired entries');
      })
      .catch((err: unknown) => logger.warn({ err }, 'privacy retention sweep failed; will retry'));
  };
  const first = setTimeout(run, 0);
  const timer = setInterval(run, cfg.sweepIntervalMs);
  first.unref();
  timer.unref();
  return {
    async stop() {
      clearTimeout(first);
      clearInterval(timer);
      await running;
    },
  };
}
