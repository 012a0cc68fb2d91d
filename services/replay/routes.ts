/**
 * Admin API: replay jobs (operator contract, "Data-team operations"). POST starts one (202), GET follows it, DELETE
 * cancels it; GET on the collection lists the workspace's jobs, newest first. A range that starts before the raw
 * log's retention horizon is refused with 422 naming the oldest time still held.
 */
import type { FastifyInstance } from 'fastify';
import { noContent, problemResponse } from '../gateway/openapi-schemas.js';
import { IngestError } from '../gateway/problems.js';
import type { Db } from '../shared/db/db.js';
import { REPLAY_STATUSES, ReplayRepo, viewOf } from './jobs.js';

export interface ReplayRoutesDeps {
  readonly db: Db;
  /** RAW_LOG_RETENTION_DAYS in ms: the log holds at least this much history. */
  readonly rawLogRetentionMs: number;
  readonly now?: () => number;
}

const time = { type: 'string', format: 'date-time', maxLength: 64 } as const;
const startBody = {
  type: 'object',
  required: ['from', 'to'],
  additionalProperties: false,
  properties: { from: time, to: time, dry_run: { type: 'boolean', default: false }, resend: { type: 'boolean', default: false } },
} as const;
const jobOut = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    workspace_id: { type: 'string' },
    status: { type: 'string', enum: [...REPLAY_STATUSES] },
    from: { type: 'string' },
    to: { type: 'string' },
    dry_run: { type: 'boolean' },
    resend: { type: 'boolean' },
    progress: { type: 'number' },
    events_read: { type: 'integer' },
    conversions_built: { type: 'integer' },
    conversions_sent: { type: 'integer', description: 'The same count as conversions_queued (its older name)' },
    conversions_queued: { type: 'integer', description: 'Filed for sending over the live connection; the forwarder sends them' },
    conversions_parked: { type: 'integer', description: 'Filed while the workspace is not connected; sent once it is' },
    skipped_already_sent: { type: 'integer', description: 'Not filed: the sent ledger holds them (resend: true sends them again)' },
    skipped_already_queued: { type: 'integer', description: 'Not filed: already waiting in the outbox, to be sent from there' },
    dropped: { type: 'object', additionalProperties: { type: 'integer' } },
    error: { type: ['string', 'null'] },
    created_at: { type: 'string' },
    started_at: { type: ['string', 'null'] },
    finished_at: { type: ['string', 'null'] },
  },
} as const;
const params = {
  type: 'object',
  required: ['ws', 'id'],
  properties: { ws: { type: 'string', maxLength: 64 }, id: { type: 'string', maxLength: 64 } },
} as const;

export function replayRoutes(app: FastifyInstance, deps: ReplayRoutesDeps): void {
  const repo = new ReplayRepo(deps.db);
  const now = deps.now ?? Date.now;
  const workspaceExists = async (ws: string): Promise<boolean> =>
    (await deps.db.query('SELECT 1 FROM workspaces WHERE id = $1', [ws])).rows.length > 0;

  app.post<{ Params: { ws: string }; Body: { from: string; to: string; dry_run: boolean; resend: boolean } }>(
    '/admin/v1/workspaces/:ws/replays',
    {
      schema: {
        summary: "Re-runs the workspace's accepted events received in [from, to) through enrichment and forwarding",
        body: startBody,
        response: { 202: { type: 'object', properties: { id: { type: 'string' }, status: { type: 'string' } } }, 422: problemResponse(422) },
      },
    },
    async (request, reply) => {
      const { ws } = request.params;
      const from = Date.parse(request.body.from);
      const to = Date.parse(request.body.to);
      if (!(from < to)) throw new IngestError('unprocessable', `from (${request.body.from}) must be before to (${request.body.to})`);
      const horizon = now() - deps.rawLogRetentionMs;
      if (from < horizon) {
        const days = Math.round((deps.rawLogRetentionMs / 86_400_000) * 100) / 100;
        throw new IngestError(
          'outOfRetention',
          `from ${new Date(from).toISOString()} is older than the raw log keeps (RAW_LOG_RETENTION_DAYS=${days}): the oldest time still held is ${new Date(horizon).toISOString()}`,
        );
      }
      if (!(await workspaceExists(ws))) throw new IngestError('notFound', `no workspace ${ws}`);
      const job = await repo.create({ workspaceId: ws, from, to, dryRun: request.body.dry_run, resend: request.body.resend });
      return reply.code(202).header('location', `/admin/v1/workspaces/${ws}/replays/${job.id}`).send({ id: job.id, status: job.status });
    },
  );

  app.get<{ Params: { ws: string } }>(
    '/admin/v1/workspaces/:ws/replays',
    { schema: { summary: "The workspace's replay jobs, newest first (at most 100)", response: { 200: { type: 'object', properties: { items: { type: 'array', items: jobOut } } } } } },
    async (request) => {
      if (!(await workspaceExists(request.params.ws))) throw new IngestError('notFound', `no workspace ${request.params.ws}`);
      return { items: (await repo.list(request.params.ws, 100)).map(viewOf) };
    },
  );

  app.get<{ Params: { ws: string; id: string } }>(
    '/admin/v1/workspaces/:ws/replays/:id',
    { schema: { summary: 'A replay job: status, progress (0..1) and counts', params, response: { 200: jobOut } } },
    async (request) => {
      const job = await repo.get(request.params.ws, request.params.id);
      if (!job) throw new IngestError('notFound', `workspace ${request.params.ws} has no replay ${request.params.id}`);
      return viewOf(job);
    },
  );

  app.delete<{ Params: { ws: string; id: string } }>(
    '/admin/v1/workspaces/:ws/replays/:id',
    { schema: { summary: 'Cancels a queued or running replay (what it already filed is sent)', params, response: { 204: noContent('Cancelled.'), 409: problemResponse(409) } } },
    async (request, reply) => {
      const job = await repo.cancel(request.params.ws, request.params.id);
      if (!job) throw new IngestError('notFound', `workspace ${request.params.ws} has no replay ${request.params.id}`);
      if (job.status !== 'cancelled') throw new IngestError('conflict', `replay ${job.id} is ${job.status}: only a queued or running replay can be cancelled`);
      return reply.code(204).send();
    },
  );
}
