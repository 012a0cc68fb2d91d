/**
 * The dead_letters table (migration 0009; written by domain/dead-letter.ts) as the admin API reads and changes it:
 * a workspace's letters page by page, letters by id, a failed redrive raising attempts, a redrive marking a letter
 * redriven, a discard with its audit entry, and the per-stage summary of GET /admin/v1/pipeline.
 */
import type { Db, Sql } from '../shared/db/db.js';
import { toNumber } from '../shared/db/db.js';

export type DeadLetterStatus = 'dead' | 'redriven';

export interface StoredDeadLetter {
  readonly seq: number;
  readonly id: string;
  readonly workspaceId: string;
  readonly stage: string;
  readonly topic: string;
  readonly eventId: string | null;
  readonly reason: string;
  readonly error: string | null;
  readonly attempts: number;
  readonly status: DeadLetterStatus;
  readonly sourceEvent: string | null;
  readonly value: unknown;
  readonly firstFailedAt: string;
  readonly lastFailedAt: string;
  readonly redrivenAt: string | null;
}

interface Row {
  seq: unknown;
  id: string;
  workspace_id: string;
  stage: string;
  topic: string;
  event_id: string | null;
  reason: string;
  error: string | null;
  attempts: unknown;
  status: DeadLetterStatus;
  source_event: string | null;
  value: unknown;
  first_failed_at: Date | string;
  last_failed_at: Date | string;
  redriven_at: Date | string | null;
}

const COLUMNS =
  'seq, id, workspace_id, stage, topic, event_id, reason, error, attempts, status, source_event, value, first_failed_at, last_failed_at, redriven_at';
const iso = (v: Date | string): string => new Date(v).toISOString();

function fromRow(r: Row): StoredDeadLetter {
  return {
    seq: toNumber(r.seq),
    id: r.id,
    workspaceId: r.workspace_id,
    stage: r.stage,
    topic: r.topic,
    eventId: r.event_id,
    reason: r.reason,
    error: r.error,
    attempts: toNumber(r.attempts),
    status: r.status,
    sourceEvent: r.source_event,
    value: r.value,
    firstFailedAt: iso(r.first_failed_at),
    lastFailedAt: iso(r.last_failed_at),
    redrivenAt: r.redriven_at === null ? null : iso(r.redriven_at),
  };
}

export interface ListQuery {
  readonly status: DeadLetterStatus;
  readonly stage?: string;
  /** Letters after this position (the previous page's cursor). */
  readonly afterSeq: number;
  readonly limit: number;
}

export interface StageSummary {
  readonly stage: string;
  readonly topic: string;
  readonly count: number;
  readonly oldest: string | null;
}

export class DeadLetterRepo {
  constructor(private readonly db: Db) {}

  /** A page of a workspace's letters, oldest first. */
  async list(workspaceId: string, q: ListQuery, sql: Sql = this.db): Promise<StoredDeadLetter[]> {
    const r = await sql.query<Row>(
      `SELECT ${COLUMNS} FROM dead_letters
       WHERE workspace_id = $1 AND status = $2 AND seq > $3 AND ($4::text IS NULL OR stage = $4)
       ORDER BY seq LIMIT $5`,
      [workspaceId, q.status, q.afterSeq, q.stage ?? null, q.limit],
    );
    return r.rows.map(fromRow);
  }

  /** The workspace's letters among `ids` (others' and unknown ids are simply absent). */
  async byIds(workspaceId: string, ids: readonly string[], sql: Sql = this.db, lock = false): Promise<StoredDeadLetter[]> {
    const r = await sql.query<Row>(
      `SELECT ${COLUMNS} FROM dead_letters WHERE workspace_id = $1 AND id = ANY($2::text[]) ORDER BY seq${lock ? ' FOR UPDATE' : ''}`,
      [workspaceId, ids],
    );
    return r.rows.map(fromRow);
  }

  /** The letter went back through its stage. */
  async markRedriven(tx: Sql, id: string): Promise<void> {
    await tx.query(`UPDATE dead_letters SET status = 'redriven', redriven_at = now() WHERE id = $1`, [id]);
  }

  /** A redrive could not send the letter back: it failed again, and stays a dead letter with one attempt more. */
  async failedAgain(tx: Sql, id: string, error: string): Promise<void> {
    await tx.query(
      `UPDATE dead_letters SET attempts = attempts + 1, status = 'dead', error = $2, last_failed_at = now() WHERE id = $1`,
      [id, error.slice(0, 2000)],
    );
  }

  /** Deletes the letter and leaves an audit entry of what it was. False when the workspace has no such letter. */
  async discard(workspaceId: string, id: string, actor = 'admin'): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const r = await tx.query<{ stage: string; reason: string; event_id: string | null; attempts: unknown; status: string; topic: string }>(
        'DELETE FROM dead_letters WHERE workspace_id = $1 AND id = $2 RETURNING stage, reason, event_id, attempts, status, topic',
        [workspaceId, id],
      );
      const gone = r.rows[0];
      if (!gone) return false;
      await tx.query('INSERT INTO audit_log (workspace_id, actor, action, detail) VALUES ($1, $2, $3, $4::jsonb)', [
        workspaceId,
        actor,
        'dead_letter.discarded',
        JSON.stringify({ id, stage: gone.stage, topic: gone.topic, reason: gone.reason, event_id: gone.event_id, attempts: toNumber(gone.attempts), status: gone.status }),
      ]);
      return true;
    });
  }

  /** The audit entry of a redrive request: how many went back, which stayed and why. */
  async auditRedrive(workspaceId: string, detail: { redriven: number; failed: ReadonlyArray<{ id: string; error: string }>; all: boolean }, actor = 'admin'): Promise<void> {
    await this.db.query('INSERT INTO audit_log (workspace_id, actor, action, detail) VALUES ($1, $2, $3, $4::jsonb)', [
      workspaceId,
      actor,
      'dead_letters.redriven',
      JSON.stringify({ redriven: detail.redriven, all: detail.all, failed: detail.failed.slice(0, 100).map((f) => f.id) }),
    ]);
  }

  /** Dead letters waiting per stage (all workspaces): how many and since when. */
  async summary(): Promise<StageSummary[]> {
    const r = await this.db.query<{ stage: string; topic: string; n: unknown; oldest: Date | string | null }>(
      `SELECT stage, topic, count(*) AS n, min(first_failed_at) AS oldest FROM dead_letters WHERE status = 'dead'
       GROUP BY stage, topic ORDER BY stage, topic`,
    );
    return r.rows.map((row) => ({ stage: row.stage, topic: row.topic, count: toNumber(row.n), oldest: row.oldest === null ? null : iso(row.oldest) }));
  }
}
