/**
 * Replay jobs in Postgres (migration 0011): created by the admin API, run by a ReplayWorker (worker.ts) under a
 * lease, read by the admin API. A job's counts and cursor move in the transaction of the chunk that produced them.
 */
import type { Db, Sql } from '../shared/db/db.js';
import { msInterval as ms, toNumber } from '../shared/db/db.js';
import { newId } from '../shared/ids.js';
import { rangeProgress, type Positions } from '../stream/range.js';

export const REPLAY_STATUSES = ['queued', 'running', 'done', 'failed', 'cancelled'] as const;
export type ReplayStatus = (typeof REPLAY_STATUSES)[number];

export interface ReplayJob {
  readonly id: string;
  readonly workspaceId: string;
  readonly from: number;
  readonly to: number;
  readonly dryRun: boolean;
  readonly resend: boolean;
  readonly status: ReplayStatus;
  readonly error: string | null;
  readonly start: Positions | null;
  readonly end: Positions | null;
  readonly cursor: Positions | null;
  readonly eventsRead: number;
  readonly conversionsBuilt: number;
  readonly conversionsSent: number;
  readonly conversionsParked: number;
  readonly skippedAlreadySent: number;
  readonly skippedAlreadyQueued: number;
  readonly dropped: Readonly<Record<string, number>>;
  readonly leaseOwner: string | null;
  readonly createdAt: number;
  readonly startedAt: number | null;
  readonly finishedAt: number | null;
}

/** What one chunk added to a job's counts. */
export interface ChunkCounts {
  readonly eventsRead: number;
  readonly conversionsBuilt: number;
  /** Filed into the outbox for a connected workspace: the forwarder sends them. */
  readonly conversionsSent: number;
  /** Filed into the outbox while the workspace is not connected: sent once it is. */
  readonly conversionsParked: number;
  readonly skippedAlreadySent: number;
  /** Already waiting in the outbox (an earlier live run or replay filed them): not filed twice. */
  readonly skippedAlreadyQueued: number;
  readonly dropped: ReadonlyMap<string, number>;
}

/** The job as the admin API answers it (operator contract, "Data-team operations"). */
export interface ReplayView {
  readonly id: string;
  readonly workspace_id: string;
  readonly status: ReplayStatus;
  readonly from: string;
  readonly to: string;
  readonly dry_run: boolean;
  readonly resend: boolean;
  readonly progress: number;
  readonly events_read: number;
  readonly conversions_built: number;
  /** The operator contract's name; the same count as conversions_queued. */
  readonly conversions_sent: number;
  readonly conversions_queued: number;
  readonly conversions_parked: number;
  readonly skipped_already_sent: number;
  readonly skipped_already_queued: number;
  readonly dropped: Readonly<Record<string, number>>;
  readonly error: string | null;
  readonly created_at: string;
  readonly started_at: string | null;
  readonly finished_at: string | null;
}

const COLUMNS = `id, workspace_id, extract(epoch FROM range_from) * 1000 AS range_from, extract(epoch FROM range_to) * 1000 AS range_to,
  dry_run, resend, status, error, start_positions, end_positions, cursor, events_read, conversions_built, conversions_sent,
  conversions_parked, skipped_already_sent, skipped_already_queued, dropped, lease_owner, extract(epoch FROM created_at) * 1000 AS created_at,
  extract(epoch FROM started_at) * 1000 AS started_at, extract(epoch FROM finished_at) * 1000 AS finished_at`;

type Row = Record<string, unknown>;
const when = (v: unknown): number | null => (v === null || v === undefined ? null : toNumber(v));

function toJob(r: Row): ReplayJob {
  return {
    id: r.id as string,
    workspaceId: r.workspace_id as string,
    from: toNumber(r.range_from),
    to: toNumber(r.range_to),
    dryRun: r.dry_run as boolean,
    resend: r.resend as boolean,
    status: r.status as ReplayStatus,
    error: (r.error as string | null) ?? null,
    start: (r.start_positions as Positions | null) ?? null,
    end: (r.end_positions as Positions | null) ?? null,
    cursor: (r.cursor as Positions | null) ?? null,
    eventsRead: toNumber(r.events_read),
    conversionsBuilt: toNumber(r.conversions_built),
    conversionsSent: toNumber(r.conversions_sent),
    conversionsParked: toNumber(r.conversions_parked),
    skippedAlreadySent: toNumber(r.skipped_already_sent),
    skippedAlreadyQueued: toNumber(r.skipped_already_queued),
    dropped: (r.dropped as Record<string, number> | null) ?? {},
    leaseOwner: (r.lease_owner as string | null) ?? null,
    createdAt: toNumber(r.created_at),
    startedAt: when(r.started_at),
    finishedAt: when(r.finished_at),
  };
}

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

export function viewOf(job: ReplayJob): ReplayView {
  const progress =
    job.status === 'done' ? 1 : job.start && job.end && job.cursor ? Math.min(1, rangeProgress(job.start, job.end, job.cursor)) : 0;
  return {
    id: job.id,
    workspace_id: job.workspaceId,
    status: job.status,
    from: iso(job.from)!,
    to: iso(job.to)!,
    dry_run: job.dryRun,
    resend: job.resend,
    progress,
    events_read: job.eventsRead,
    conversions_built: job.conversionsBuilt,
    conversions_sent: job.conversionsSent,
    conversions_queued: job.conversionsSent,
    conversions_parked: job.conversionsParked,
    skipped_already_sent: job.skippedAlreadySent,
    skipped_already_queued: job.skippedAlreadyQueued,
    dropped: job.dropped,
    error: job.error,
    created_at: iso(job.createdAt)!,
    started_at: iso(job.startedAt),
    finished_at: iso(job.finishedAt),
  };
}

export class ReplayRepo {
  constructor(private readonly db: Db) {}

  async create(input: { workspaceId: string; from: number; to: number; dryRun: boolean; resend: boolean }): Promise<ReplayJob> {
    const r = await this.db.query<Row>(
      `INSERT INTO replay_jobs (id, workspace_id, range_from, range_to, dry_run, resend, status)
       VALUES ($1, $2, to_timestamp($3::double precision / 1000.0), to_timestamp($4::double precision / 1000.0), $5, $6, 'queued')
       RETURNING ${COLUMNS}`,
      [newId('rpl'), input.workspaceId, input.from, input.to, input.dryRun, input.resend],
    );
    return toJob(r.rows[0]!);
  }

  async get(workspaceId: string, id: string): Promise<ReplayJob | null> {
    const r = await this.db.query<Row>(`SELECT ${COLUMNS} FROM replay_jobs WHERE workspace_id = $1 AND id = $2`, [workspaceId, id]);
    return r.rows[0] ? toJob(r.rows[0]) : null;
  }

  /** The workspace's jobs, newest first. */
  async list(workspaceId: string, limit: number): Promise<ReplayJob[]> {
    const r = await this.db.query<Row>(`SELECT ${COLUMNS} FROM replay_jobs WHERE workspace_id = $1 ORDER BY created_at DESC, id LIMIT $2`, [
      workspaceId,
      limit,
    ]);
    return r.rows.map(toJob);
  }

  /** Jobs queued or running, every workspace (pipeline status). */
  async active(): Promise<ReplayJob[]> {
    const r = await this.db.query<Row>(`SELECT ${COLUMNS} FROM replay_jobs WHERE status IN ('queued', 'running') ORDER BY created_at`);
    return r.rows.map(toJob);
  }

  /** Cancels a queued or running job; the worker notices at its next chunk. Returns the job as it is now. */
  async cancel(workspaceId: string, id: string): Promise<ReplayJob | null> {
    await this.db.query(
      `UPDATE replay_jobs SET status = 'cancelled', finished_at = now(), lease_owner = NULL, lease_until = NULL
       WHERE workspace_id = $1 AND id = $2 AND status IN ('queued', 'running')`,
      [workspaceId, id],
    );
    return this.get(workspaceId, id);
  }

  /** Takes the oldest job nobody holds (queued, or running under a lease that ran out), for `leaseMs`. */
  async claim(owner: string, leaseMs: number): Promise<ReplayJob | null> {
    const r = await this.db.query<Row>(
      `UPDATE replay_jobs SET status = 'running', lease_owner = $1, lease_until = now() + ${ms('$2')},
              started_at = COALESCE(started_at, now())
       WHERE id = (SELECT id FROM replay_jobs
                   WHERE status IN ('queued', 'running') AND (lease_until IS NULL OR lease_until < now())
                   ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
       RETURNING ${COLUMNS}`,
      [owner, leaseMs],
    );
    return r.rows[0] ? toJob(r.rows[0]) : null;
  }

  /** Keeps the lease; false when the job is no longer this owner's to run (cancelled, or taken over). */
  async renew(id: string, owner: string, leaseMs: number): Promise<boolean> {
    const r = await this.db.query<{ id: string }>(
      `UPDATE replay_jobs SET lease_until = now() + ${ms('$3')}
       WHERE id = $1 AND lease_owner = $2 AND status = 'running' RETURNING id`,
      [id, owner, leaseMs],
    );
    return r.rows.length > 0;
  }

  async setBounds(id: string, owner: string, start: Positions, end: Positions): Promise<void> {
    await this.db.query(
      `UPDATE replay_jobs SET start_positions = $3, end_positions = $4, cursor = $3 WHERE id = $1 AND lease_owner = $2`,
      [id, owner, JSON.stringify(start), JSON.stringify(end)],
    );
  }

  /**
   * Locks the job row for a chunk's transaction: the chunk goes on only when the job is still running under this
   * owner (a cancel waits for the chunk, or the chunk sees the cancel).
   */
  async lockForChunk(tx: Sql, id: string, owner: string): Promise<ReplayJob | null> {
    const r = await tx.query<Row>(`SELECT ${COLUMNS} FROM replay_jobs WHERE id = $1 FOR UPDATE`, [id]);
    const job = r.rows[0] ? toJob(r.rows[0]) : null;
    return job && job.status === 'running' && job.leaseOwner === owner ? job : null;
  }

  /** A chunk's counts and the partition's new position, in the chunk's transaction. */
  async advance(tx: Sql, id: string, partition: number, next: string, counts: ChunkCounts, leaseMs: number): Promise<void> {
    await tx.query(
      `UPDATE replay_jobs SET
         cursor = jsonb_set(COALESCE(cursor, '{}'::jsonb), ARRAY[$2::text], to_jsonb($3::text)),
         events_read = events_read + $4, conversions_built = conversions_built + $5,
         conversions_sent = conversions_sent + $6, skipped_already_sent = skipped_already_sent + $7,
         conversions_parked = conversions_parked + $10, skipped_already_queued = skipped_already_queued + $11,
         dropped = (SELECT COALESCE(jsonb_object_agg(k, n), '{}'::jsonb) FROM (
                      SELECT k, sum(n)::bigint AS n FROM (
                        SELECT key AS k, value::text::bigint AS n FROM jsonb_each(dropped)
                        UNION ALL SELECT key, value::text::bigint FROM jsonb_each($8::jsonb)) AS both_counts
                      GROUP BY k) AS summed),
         lease_until = now() + ${ms('$9')}
       WHERE id = $1`,
      [
        id,
        String(partition),
        next,
        counts.eventsRead,
        counts.conversionsBuilt,
        counts.conversionsSent,
        counts.skippedAlreadySent,
        JSON.stringify(Object.fromEntries(counts.dropped)),
        leaseMs,
        counts.conversionsParked,
        counts.skippedAlreadyQueued,
      ],
    );
  }

  async finish(id: string, owner: string, status: 'done' | 'failed', error: string | null = null): Promise<void> {
    await this.db.query(
      `UPDATE replay_jobs SET status = $3, error = $4, finished_at = now(), lease_owner = NULL, lease_until = NULL
       WHERE id = $1 AND lease_owner = $2 AND status = 'running'`,
      [id, owner, status, error],
    );
  }

  /** Gives the job back (a worker stopping): another worker, or this one after a restart, resumes it at once. */
  async release(id: string, owner: string): Promise<void> {
    await this.db.query(`UPDATE replay_jobs SET lease_owner = NULL, lease_until = NULL WHERE id = $1 AND lease_owner = $2 AND status = 'running'`, [
      id,
      owner,
    ]);
  }
}
