/**
 * Erasure jobs (POST/GET /admin/v1/workspaces/{ws}/erasures, docs/privacy.md). A request is stored queued with its
 * identifiers in clear in `pending` and, from the start, an audit form of them (`subject`: salted hashes); the worker
 * takes the oldest queued job under a conditional update (one replica runs it), runs every store's step in ONE
 * transaction (erasure-steps.ts), records what each removed, and clears `pending`. A failed attempt is retried
 * (3 attempts), then the job is `failed` and its identifiers are cleared all the same. Both runtimes: everything an
 * erasure touches is in the database, and the Kafka topics are covered by the redaction list.
 */
import { audit } from '../domain/audit-log.js';
import { msInterval as ms, type Db } from '../shared/db/db.js';
import { newId } from '../shared/ids.js';
import type { Logger } from '../shared/logger.js';
import { PollLoop } from '../shared/poll-loop.js';
import { lockForErasure, marksOf, saltedHash, workspaceSalt } from '../enrich/identity/erasure-filter.js';
import type { GraphNode } from '../enrich/identity/kinds.js';
import type { ErasureStep, ErasureSubject } from './erasure-steps.js';
import { erasedRecords, erasuresTotal } from './metrics.js';

/** The request body's identifiers (operator contract, "Privacy"). */
export interface ErasureIdentifiers {
  readonly user?: string;
  readonly sha256_email?: string;
  readonly sha256_phone?: string;
  readonly client_id?: string;
}

export type ErasureStatus = 'queued' | 'running' | 'done' | 'failed';

export interface ErasureView {
  readonly id: string;
  readonly status: ErasureStatus;
  readonly requested_at: string;
  readonly finished_at: string | null;
  readonly removed: Readonly<Record<string, number>>;
  /** The audit form of the request: which kinds of identifier were given, each as a salted hash. */
  readonly subject: Readonly<Record<string, string>>;
  readonly error: string | null;
}

const MAX_ATTEMPTS = 3;
/** A job `running` longer than this was taken by a replica that died: it is taken again. */
const STALE_RUNNING_MS = 5 * 60_000;

/** The graph nodes an identifier of the request names (an email hash may be stored under either email kind). */
export function nodesOf(ids: ErasureIdentifiers): GraphNode[] {
  const out: GraphNode[] = [];
  if (ids.user !== undefined) out.push({ kind: 'user_id', value: ids.user });
  if (ids.sha256_email !== undefined) out.push({ kind: 'email_sha256', value: ids.sha256_email }, { kind: 'email_canonical_sha256', value: ids.sha256_email });
  if (ids.sha256_phone !== undefined) out.push({ kind: 'phone_e164_sha256', value: ids.sha256_phone });
  if (ids.client_id !== undefined) out.push({ kind: 'client_id', value: ids.client_id });
  return out;
}

const KIND_OF: Readonly<Record<keyof ErasureIdentifiers, GraphNode['kind']>> = {
  user: 'user_id',
  sha256_email: 'email_sha256',
  sha256_phone: 'phone_e164_sha256',
  client_id: 'client_id',
};

interface ErasureRow {
  id: string;
  workspace_id: string;
  status: ErasureStatus;
  requested_at: Date | string;
  finished_at: Date | string | null;
  removed: Record<string, number>;
  subject: Record<string, string>;
  error: string | null;
  pending: ErasureIdentifiers | null;
  attempts: number;
}

const iso = (v: Date | string | null): string | null => (v === null ? null : new Date(v).toISOString());
const view = (r: ErasureRow): ErasureView => ({
  id: r.id,
  status: r.status,
  requested_at: iso(r.requested_at)!,
  finished_at: iso(r.finished_at),
  removed: r.removed,
  subject: r.subject,
  error: r.error,
});

export class ErasureRepo {
  constructor(private readonly db: Db) {}

  async request(workspaceId: string, ids: ErasureIdentifiers): Promise<ErasureView> {
    return this.db.transaction(async (tx) => {
      const salt = await workspaceSalt(tx, workspaceId);
      const subject = Object.fromEntries(
        Object.entries(ids).map(([k, v]) => [k, saltedHash(salt, marksOf([{ kind: KIND_OF[k as keyof ErasureIdentifiers], value: v as string }])[0]!)]),
      );
      const id = newId('era');
      const r = await tx.query<ErasureRow>(
        `INSERT INTO erasures (id, workspace_id, status, pending, subject) VALUES ($1, $2, 'queued', $3::jsonb, $4::jsonb) RETURNING *`,
        [id, workspaceId, JSON.stringify(ids), JSON.stringify(subject)],
      );
      await audit(tx, workspaceId, 'erasure.requested', { erasure_id: id, identifier_kinds: Object.keys(ids) }, 'admin');
      return view(r.rows[0]!);
    });
  }

  async get(workspaceId: string, id: string): Promise<ErasureView | null> {
    const r = await this.db.query<ErasureRow>('SELECT * FROM erasures WHERE id = $1 AND workspace_id = $2', [id, workspaceId]);
    return r.rows[0] ? view(r.rows[0]) : null;
  }

  /** Takes the oldest runnable job (queued, or running on a replica that died), or null. */
  async take(): Promise<(ErasureRow & { requested_ms: number }) | null> {
    const r = await this.db.query<ErasureRow & { requested_ms: number }>(
      `UPDATE erasures SET status = 'running', started_at = now(), attempts = attempts + 1
       WHERE id = (SELECT id FROM erasures
                   WHERE status = 'queued' OR (status = 'running' AND started_at < now() - ${ms('$1')})
                   ORDER BY requested_at LIMIT 1)
         AND (status = 'queued' OR started_at < now() - ${ms('$1')})
       RETURNING *, (extract(epoch from requested_at) * 1000)::float8 AS requested_ms`,
      [STALE_RUNNING_MS],
    );
    return r.rows[0] ?? null;
  }

  /** Runs the job's steps in one transaction and records the outcome. */
  async run(job: ErasureRow & { requested_ms: number }, steps: readonly ErasureStep[]): Promise<ErasureStatus> {
    try {
      const removed = await this.db.transaction(async (tx) => {
        const subject: ErasureSubject = {
          erasureId: job.id,
          workspaceId: job.workspace_id,
          requestedAt: Number(job.requested_ms),
          nodes: nodesOf(job.pending ?? {}),
        };
        await lockForErasure(tx, job.workspace_id);
        const out: Record<string, number> = {};
        for (const step of steps) out[step.store] = await step.run(tx, subject);
        await tx.query(
          `UPDATE erasures SET status = 'done', finished_at = now(), pending = NULL, removed = $2::jsonb, error = NULL WHERE id = $1`,
          [job.id, JSON.stringify(out)],
        );
        await audit(tx, job.workspace_id, 'erasure.done', { erasure_id: job.id, removed: out }, 'admin');
        return out;
      });
      for (const [store, n] of Object.entries(removed)) erasedRecords.inc({ store }, n);
      erasuresTotal.inc({ status: 'done' });
      return 'done';
    } catch (err) {
      const last = job.attempts >= MAX_ATTEMPTS;
      // NOTE: the message of a database error never holds parameter values, so no identifier reaches the record.
      const message = err instanceof Error ? err.message.slice(0, 500) : 'unknown error';
      await this.db.query(
        `UPDATE erasures SET status = $2, error = $3, finished_at = CASE WHEN $2 = 'failed' THEN now() END,
                pending = CASE WHEN $2 = 'failed' THEN NULL ELSE pending END WHERE id = $1`,
        [job.id, last ? 'failed' : 'queued', message],
      );
      if (last) {
        await audit(this.db, job.workspace_id, 'erasure.failed', { erasure_id: job.id }, 'admin');
        erasuresTotal.inc({ status: 'failed' });
      }
      throw err;
    }
  }
}

/** Runs queued erasures: polls, and wakes at once when a request arrives in this process. */
export class ErasureWorker {
  private readonly loop: PollLoop;
  private readonly repo: ErasureRepo;

  constructor(
    private readonly deps: { readonly db: Db; readonly steps: readonly ErasureStep[]; readonly logger: Logger; readonly pollMs: number },
  ) {
    this.repo = new ErasureRepo(deps.db);
    this.loop = new PollLoop({
      intervalMs: deps.pollMs,
      run: () => this.drain(),
      failed: (err) => deps.logger.warn({ err }, 'erasure job failed; will retry'),
    });
  }

  start(): void {
    this.loop.start();
  }

  /** A request arrived: run it now rather than at the next poll. */
  wake(): void {
    this.loop.wake();
  }

  /** Runs every runnable job. */
  async drain(): Promise<number> {
    let n = 0;
    for (let job = await this.repo.take(); job && !this.loop.stopping; job = await this.repo.take()) {
      const status = await this.repo.run(job, this.deps.steps);
      this.deps.logger.info({ erasure_id: job.id, workspace_id: job.workspace_id, status }, 'erasure finished');
      n++;
    }
    return n;
  }

  async close(): Promise<void> {
    await this.loop.stop();
  }
}
