/** Admin API: the workspace's ad-platform connection (operator contract; docs/platform.md). */
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { noContent, problemResponse } from '../../gateway/openapi-schemas.js';
import { IngestError } from '../../gateway/problems.js';
import type { ConnectionRepo } from '../../forwarder/connection-repo.js';
import { forwardedConversions } from '../../forwarder/metrics.js';
import type { OAuthFlow } from '../../forwarder/oauth-flow.js';
import { PlatformNotConfiguredError } from '../../forwarder/platform-client.js';
import type { Revoker } from '../../forwarder/revoker.js';
import { CONNECTION_PROBLEMS, sendConnectionProblem } from '../connection-problems.js';
import type { WorkspaceRepo } from '../workspace-repo.js';

export interface ConnectionRouteDeps {
  readonly workspaces: WorkspaceRepo;
  readonly connections: ConnectionRepo;
  readonly flow: OAuthFlow;
  readonly revoker: Revoker;
  readonly publicBaseUrl: string;
  /** How long DELETE waits for the platform to confirm the revocation before answering (it goes on after). */
  readonly revocationWaitMs?: number;
}

const nullableString = { type: ['string', 'null'] } as const;

const connectionOut = {
  type: 'object',
  properties: {
    status: { type: 'string', enum: ['connected', 'needs_reauth', 'disconnected'] },
    advertiser_id: nullableString,
    time_zone: nullableString,
    access_expires_at: nullableString,
    refresh_expires_at: nullableString,
    connected_at: nullableString,
    last_refreshed_at: nullableString,
    reason: nullableString,
  },
} as const;

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

export type ConnectionView = ReturnType<typeof connectionView>;

/** What GET /connection answers, and what the console's Connection page shows. */
export function connectionView(c: Awaited<ReturnType<ConnectionRepo['get']>>) {
  // Never connected reads as disconnected: nothing is forwarded (conversions wait for a first connection).
  if (!c) {
    return {
      status: 'disconnected' as const,
      advertiser_id: null,
      time_zone: null,
      access_expires_at: null,
      refresh_expires_at: null,
      connected_at: null,
      last_refreshed_at: null,
      reason: 'never connected',
    };
  }
  return {
    status: c.status,
    advertiser_id: c.advertiserId,
    time_zone: c.timeZone,
    access_expires_at: iso(c.accessExpiresAt),
    refresh_expires_at: iso(c.refreshExpiresAt),
    connected_at: iso(c.connectedAt),
    last_refreshed_at: iso(c.lastRefreshedAt),
    reason: c.statusReason,
  };
}

/**
 * Disconnects: credentials deleted and queued conversions dropped (one transaction), then the platform asked to
 * revoke. Best effort, briefly awaited so the common case is done when we answer; a failure stays queued and the
 * refresher retries it. The local deletion stands either way.
 */
export async function disconnectWorkspace(
  deps: Pick<ConnectionRouteDeps, 'connections' | 'revoker' | 'revocationWaitMs'>,
  ws: string,
  actor: string,
  log: FastifyBaseLogger,
): Promise<void> {
  const { dropped, revocationId } = await deps.connections.disconnect(ws, actor);
  if (dropped > 0) forwardedConversions.inc({ outcome: 'dropped', code: 'disconnected' }, dropped);
  log.info({ workspace: ws, dropped }, 'ad account disconnected');
  if (revocationId === null) return;
  const attempt = deps.revoker.attempt(revocationId).catch((err: unknown) => {
    log.warn({ err, workspace: ws }, 'revocation attempt failed; queued for retry');
  });
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([attempt, new Promise<void>((r) => (timer = setTimeout(r, deps.revocationWaitMs ?? 3_000)))]);
  clearTimeout(timer);
}

export function connectionRoutes(app: FastifyInstance, deps: ConnectionRouteDeps): void {
  const requireWorkspace = async (ws: string): Promise<void> => {
    if (!(await deps.workspaces.get(ws))) throw new IngestError('notFound', `no workspace ${ws}`);
  };

  app.post<{ Params: { ws: string } }>(
    '/admin/v1/workspaces/:ws/connection',
    {
      schema: {
        response: {
          200: {
            type: 'object',
            properties: { authorize_url: { type: 'string' }, redirect_uri: { type: 'string' }, expires_at: { type: 'string' } },
          },
          503: problemResponse(503),
        },
      },
    },
    async (request, reply) => {
      await requireWorkspace(request.params.ws);
      try {
        const started = await deps.flow.start(request.params.ws);
        // The service's own link: opening it binds the flow to that browser, then redirects to the platform.
        return { authorize_url: started.startUrl, redirect_uri: deps.flow.redirectUri, expires_at: started.expiresAt.toISOString() };
      } catch (err) {
        if (!(err instanceof PlatformNotConfiguredError)) throw err;
        return sendConnectionProblem(request, reply, deps.publicBaseUrl, CONNECTION_PROBLEMS.notConfigured, err.message);
      }
    },
  );

  app.get<{ Params: { ws: string } }>(
    '/admin/v1/workspaces/:ws/connection',
    { schema: { response: { 200: connectionOut } } },
    async (request) => {
      await requireWorkspace(request.params.ws);
      return connectionView(await deps.connections.get(request.params.ws));
    },
  );

  app.delete<{ Params: { ws: string } }>('/admin/v1/workspaces/:ws/connection', { schema: { response: { 204: noContent('Disconnected: credentials deleted, revocation requested.') } } }, async (request, reply) => {
    const ws = request.params.ws;
    await requireWorkspace(ws);
    await disconnectWorkspace(deps, ws, 'admin', request.log);
    return reply.code(204).send();
  });
}
