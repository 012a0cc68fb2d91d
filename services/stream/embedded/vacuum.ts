/**
 * Vacuum for the embedded store on PGlite, which has no autovacuum. Without it, the row versions that updates and
 * deletes leave behind are never reclaimed: state_store's entries are rewritten for most events (an identity
 * cluster's summary), consumer_offsets at every batch, the outboxes and ledgers churn, and the log's retention deletes
 * free nothing. Tables and their indexes then grow for as long as the process runs and their upserts slow down
 * (50,000 state entries rewritten twelve times: 500 MB and ~700–780 ms a round without, 129 MB and mostly ~460–580 ms
 * with: docs/decisions.md), and after ~2 billion transactions the store would stop taking writes to avoid
 * transaction-id wraparound.
 *
 * The rules are autovacuum's defaults: a table whose dead row versions exceed 50 + 20% of its live rows, or whose
 * oldest unfrozen transaction id is older than 200 million (anti-wraparound, first). PGlite runs one statement at a
 * time, so a VACUUM holds every other statement up while it runs: a pass vacuums the due tables one at a time, most
 * dead versions first, and starts no new one once it has taken `budgetMs` (it always does one); the rest wait for the
 * next pass.
 * On Postgres (DATABASE_URL) the server's autovacuum does this, and the embedded runtime does not start it.
 */
import type { Db } from '../../shared/db/db.js';
import type { Logger } from '../../shared/logger.js';
import { embeddedVacuumDuration } from '../../shared/metrics.js';

export interface VacuumRules {
  /** Dead row versions over `deadBase + deadScale × live rows` make a table due (autovacuum_vacuum_threshold/scale_factor). */
  readonly deadBase: number;
  readonly deadScale: number;
  /** A table whose relfrozenxid is older than this many transactions is due (autovacuum_freeze_max_age). */
  readonly freezeMaxAge: number;
  /** A pass starts no new VACUUM once it has taken this long (ms). */
  readonly budgetMs: number;
}

export const DEFAULT_VACUUM_RULES: VacuumRules = { deadBase: 50, deadScale: 0.2, freezeMaxAge: 200_000_000, budgetMs: 250 };

export interface Vacuumed {
  readonly table: string;
  /** Dead row versions the statistics counted before. */
  readonly dead: number;
  /** Due for its transaction ids' age. */
  readonly wraparound: boolean;
  readonly ms: number;
}

/** One pass: the due tables, anti-wraparound first, then most dead versions first, within the budget. */
export async function vacuumDue(db: Db, rules: VacuumRules = DEFAULT_VACUUM_RULES): Promise<Vacuumed[]> {
  const due = await db.query<{ name: string; table: string; dead: unknown; wraparound: boolean }>(
    `SELECT format('%I.%I', s.schemaname, s.relname) AS name, s.relname AS table, s.n_dead_tup AS dead,
            age(c.relfrozenxid) > $3::int AS wraparound
     FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
     WHERE s.n_dead_tup > $1::float8 + $2::float8 * s.n_live_tup OR age(c.relfrozenxid) > $3::int
     ORDER BY age(c.relfrozenxid) > $3::int DESC, s.n_dead_tup DESC`,
    [rules.deadBase, rules.deadScale, rules.freezeMaxAge],
  );
  const started = performance.now();
  const done: Vacuumed[] = [];
  for (const t of due.rows) {
    // At least one a pass, whatever the budget: else a table slower than the budget would never be vacuumed.
    if (done.length > 0 && performance.now() - started >= rules.budgetMs) break;
    const at = performance.now();
    // The name comes from the catalog, quoted by format('%I'): no user input reaches the statement.
    await db.query(`VACUUM ${t.name}`);
    const ms = performance.now() - at;
    embeddedVacuumDuration.observe({ table: t.table }, ms / 1000);
    done.push({ table: t.table, dead: Number(t.dead), wraparound: t.wraparound, ms: Math.round(ms) });
  }
  return done;
}

/** Passes every `intervalMs` until stopped; `stop` waits for a pass in flight. */
export function startVacuum(db: Db, logger: Logger, intervalMs = 10_000, rules: VacuumRules = DEFAULT_VACUUM_RULES): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;
  const timer = setInterval(() => {
    // A pass still running (a large table) is not joined by another.
    if (running) return;
    running = vacuumDue(db, rules)
      .then((done) => {
        if (done.length > 0) logger.debug({ vacuumed: done }, 'embedded store: vacuumed');
      })
      .catch((err: unknown) => logger.warn({ err }, 'embedded store: vacuum failed; will retry'))
      .finally(() => (running = undefined));
  }, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
