/**
 * Admin API: the workspace's destinations (operator contract, "Destinations"). The workspace's forwarding setup and
 * connection (`/forwarding`, `/connection`) are its first `tiktok` destination, listed here with the id `tiktok`;
 * every other destination is a row of `destinations` (forwarder/destinations/repo.ts).
 */
import { Ajv } from 'ajv';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply } from 'fastify';
import { noContent, problems } from '../../gateway/openapi-schemas.js';
import { IngestError } from '../../gateway/problems.js';
import type { ConnectionRepo } from '../../forwarder/connection-repo.js';
import { destinationConversions } from '../../forwarder/metrics.js';
import { DESTINATION_KINDS, type DestinationKindName } from '../../forwarder/destinations/kind.js';
import { DestinationFlow, KindNotConnectableError } from '../../forwarder/destinations/flow.js';
import { MetaNotConfiguredError, metaSetupSchema, type MetaClient } from '../../forwarder/destinations/meta.js';
import { GoogleNotConfiguredError, googleSetupSchema, type GoogleClient } from '../../forwarder/destinations/google.js';
import type { Destination, DestinationRepo, DestinationSetup } from '../../forwarder/destinations/repo.js';
import type { OAuthFlow } from '../../forwarder/oauth-flow.js';
import { PlatformNotConfiguredError, type PlatformClient } from '../../forwarder/platform-client.js';
import type { Revoker } from '../../forwarder/revoker.js';
import type { Db } from '../../shared/db/db.js';
import type { ForwardingSetup, ForwardingSetupInput } from '../../domain/forwarding-setup.js';
import { CONNECTION_PROBLEMS, sendConnectionProblem } from '../connection-problems.js';
import { ForwardingRepo } from '../forwarding-repo.js';
import type { WorkspaceRepo } from '../workspace-repo.js';
import { connectionView, disconnectWorkspace } from './connection.js';
import { repeatedEventName, setupBody } from './forwarding.js';

/** The id under which the workspace's first TikTok destination (its /forwarding and /connection) is listed. */
export const FIRST_TIKTOK_ID = 'tiktok';

export interface DestinationRouteDeps {
  readonly db: Db;
  readonly workspaces: WorkspaceRepo;
  readonly destinations: DestinationRepo;
  readonly destinationFlow: DestinationFlow;
  readonly meta: MetaClient;
  readonly google: GoogleClient;
  /** TikTok's client: a second TikTok destination's token is revoked with it. */
  readonly tiktok: PlatformClient;
  readonly connections: ConnectionRepo;
  readonly flow: OAuthFlow;
  readonly revoker: Revoker;
  readonly publicBaseUrl: string;
}

const tiktokSetupValid = new Ajv({ allErrors: false, strict: false }).compile(setupBody);

/** The setup as the kind requires it, or a message saying what is wrong. */
export function parseSetup(
  kind: DestinationKindName,
  setup: unknown,
): { ok: true; setup: DestinationSetup } | { ok: false; message: string; issues?: ReadonlyArray<{ path: string; message: string }> } {
  if (kind === 'meta' || kind === 'google') {
    const r = (kind === 'meta' ? metaSetupSchema : googleSetupSchema).safeParse(setup);
    if (!r.success) {
      const i = r.error.issues[0]!;
      // Every issue too, for a form that shows each next to its field (the console).
      const issues = r.error.issues.map((x) => ({ path: x.path.join('.'), message: x.message }));
      return { ok: false, message: `setup.${i.path.join('.') || '(root)'}: ${i.message}`, issues };
    }
    const repeated = repeatedEventName(r.data.events);
    if (repeated !== undefined) return { ok: false, message: `setup.events: "${repeated}" is listed more than once` };
    return { ok: true, setup: r.data };
  }
  if (kind === 'tiktok') {
    if (!tiktokSetupValid(setup)) {
      const e = tiktokSetupValid.errors?.[0];
      return { ok: false, message: `setup${e?.instancePath.replaceAll('/', '.') ?? ''}: ${e?.message ?? 'invalid'}` };
    }
    const repeated = repeatedEventName((setup as ForwardingSetupInput).events);
    if (repeated !== undefined) return { ok: false, message: `setup.events: "${repeated}" is listed more than once` };
    return { ok: true, setup: setup as unknown as DestinationSetup };
  }
  return { ok: false, message: `kind ${String(kind)} is not available` };
}

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

function destinationOut(d: Destination) {
  return { id: d.id, kind: d.kind, name: d.name, setup: d.setup, status: d.status, account_id: d.accountId, reason: d.statusReason };
}

function firstTiktokOut(setup: ForwardingSetup, status: string, accountId: string | null, reason: string | null) {
  const { workspace_id: _w, updated_at: _u, ...body } = setup as ForwardingSetup & { workspace_id?: string; updated_at?: string };
  return { id: FIRST_TIKTOK_ID, kind: 'tiktok' as const, name: 'TikTok', setup: body, status, account_id: accountId, reason };
}

const body = {
  type: 'object',
  required: ['kind', 'name', 'setup'],
  additionalProperties: false,
  properties: {
    kind: { type: 'string', enum: [...DESTINATION_KINDS] },
    name: { type: 'string', minLength: 1, maxLength: 200, pattern: '\\S' },
    setup: { type: 'object' },
  },
} as const;
const putBody = { ...body, required: ['name', 'setup'], properties: { ...body.properties, kind: { type: 'string', enum: [...DESTINATION_KINDS] } } } as const;

type Params = { ws: string; id: string };

const nullableString = { type: ['string', 'null'] } as const;
const destinationSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    kind: { type: 'string', enum: [...DESTINATION_KINDS] },
    name: { type: 'string' },
    setup: { type: 'object', additionalProperties: true },
    status: { type: 'string', enum: ['connected', 'needs_reauth', 'disconnected'] },
    account_id: nullableString,
    reason: nullableString,
  },
} as const;
const connectionSchema = {
  type: 'object',
  properties: {
    status: { type: 'string', enum: ['connected', 'needs_reauth', 'disconnected'] },
    account_id: nullableString,
    time_zone: nullableString,
    access_expires_at: nullableString,
    reason: nullableString,
  },
} as const;
const authorizeSchema = {
  type: 'object',
  properties: { authorize_url: { type: 'string' }, redirect_uri: { type: 'string' }, expires_at: { type: 'string' } },
} as const;

/**
 * Disconnects (or removes) a destination: credentials deleted and queued conversions dropped at once; the platform
 * asked to revoke, briefly awaited. The admin API and the console both go through here.
 */
export async function disconnectDestination(
  deps: Pick<DestinationRouteDeps, 'destinations' | 'meta' | 'google' | 'tiktok'>,
  log: FastifyBaseLogger,
  d: Destination,
  remove: boolean,
): Promise<void> {
  const { accessToken, refreshToken, dropped } = remove ? { ...(await deps.destinations.remove(d.workspaceId, d.id)), dropped: 0 } : await deps.destinations.disconnect(d.id);
  if (dropped > 0) destinationConversions.inc({ destination: d.kind, outcome: 'dropped', code: 'disconnected' }, dropped);
  // Google: revoking the refresh token ends the whole grant; Meta: removing the app's permissions does; TikTok:
  // revoking the access token does.
  const token = d.kind === 'google' ? (refreshToken ?? accessToken) : accessToken;
  if (token === null) return;
  if (d.kind === 'tiktok' && !deps.tiktok.configured) {
    log.warn({ destination: d.id }, 'destination token deleted, not revoked: the TikTok app is not configured here');
    return;
  }
  const answer = d.kind === 'google' ? await deps.google.revoke(token) : d.kind === 'tiktok' ? await deps.tiktok.revoke(token) : await deps.meta.revoke(token);
  if (answer.code === 0) log.info({ destination: d.id }, 'destination permissions revoked');
  // A token Meta no longer takes has nothing left to revoke; anything else is logged for the operator.
  else log.warn({ destination: d.id, code: answer.code, message: answer.message }, 'destination revocation not confirmed');
}

export function destinationRoutes(app: FastifyInstance, deps: DestinationRouteDeps): void {
  const forwarding = new ForwardingRepo(deps.db);
  const requireWorkspace = async (ws: string): Promise<void> => {
    if (!(await deps.workspaces.get(ws))) throw new IngestError('notFound', `no workspace ${ws}`);
  };
  const firstTiktok = async (ws: string) => {
    const setup = await forwarding.get(ws);
    if (!setup) return undefined;
    const c = connectionView(await deps.connections.get(ws));
    return firstTiktokOut(setup, c.status, c.advertiser_id, c.reason);
  };
  const requireDestination = async (ws: string, id: string): Promise<Destination> => {
    const d = await deps.destinations.get(ws, id);
    if (!d) throw new IngestError('notFound', `workspace ${ws} has no destination ${id}`);
    return d;
  };

  app.post<{ Params: { ws: string }; Body: { kind: DestinationKindName; name: string; setup: unknown } }>(
    '/admin/v1/workspaces/:ws/destinations',
    { schema: { body, response: { 201: destinationSchema, ...problems(422) } } },
    async (request, reply) => {
      const { ws } = request.params;
      await requireWorkspace(ws);
      const { kind, name } = request.body;
      const parsed = parseSetup(kind, request.body.setup);
      if (!parsed.ok) throw new IngestError('unprocessable', parsed.message);
      // The workspace's first TikTok destination is its forwarding setup; a second (third…) one is a destination
      // of its own, with its own connection, like any other kind.
      if (kind === 'tiktok' && !(await forwarding.get(ws))) {
        await forwarding.put(ws, request.body.setup as ForwardingSetupInput);
        return reply.code(201).send(await firstTiktok(ws));
      }
      const d = await deps.destinations.create(ws, kind, name, parsed.setup);
      return reply.code(201).send(destinationOut(d));
    },
  );

  app.get<{ Params: { ws: string } }>(
    '/admin/v1/workspaces/:ws/destinations',
    { schema: { response: { 200: { type: 'object', properties: { items: { type: 'array', items: destinationSchema } } } } } },
    async (request) => {
    const { ws } = request.params;
    await requireWorkspace(ws);
    const first = await firstTiktok(ws);
    return { items: [...(first ? [first] : []), ...(await deps.destinations.list(ws)).map(destinationOut)] };
    },
  );

  app.get<{ Params: Params }>('/admin/v1/workspaces/:ws/destinations/:id', { schema: { response: { 200: destinationSchema } } }, async (request) => {
    const { ws, id } = request.params;
    await requireWorkspace(ws);
    if (id === FIRST_TIKTOK_ID) {
      const first = await firstTiktok(ws);
      if (!first) throw new IngestError('notFound', `workspace ${ws} has no TikTok destination`);
      return first;
    }
    return destinationOut(await requireDestination(ws, id));
  });

  app.put<{ Params: Params; Body: { kind?: DestinationKindName; name: string; setup: unknown } }>(
    '/admin/v1/workspaces/:ws/destinations/:id',
    { schema: { body: putBody, response: { 200: destinationSchema, ...problems(422) } } },
    async (request) => {
      const { ws, id } = request.params;
      await requireWorkspace(ws);
      if (id === FIRST_TIKTOK_ID) {
        const parsed = parseSetup('tiktok', request.body.setup);
        if (!parsed.ok) throw new IngestError('unprocessable', parsed.message);
        await forwarding.put(ws, request.body.setup as ForwardingSetupInput);
        return firstTiktok(ws);
      }
      const d = await requireDestination(ws, id);
      if (request.body.kind !== undefined && request.body.kind !== d.kind) throw new IngestError('unprocessable', `kind: a ${d.kind} destination stays ${d.kind}`);
      const parsed = parseSetup(d.kind, request.body.setup);
      if (!parsed.ok) throw new IngestError('unprocessable', parsed.message);
      return destinationOut((await deps.destinations.update(ws, id, request.body.name, parsed.setup))!);
    },
  );

  app.delete<{ Params: Params }>(
    '/admin/v1/workspaces/:ws/destinations/:id',
    { schema: { response: { 204: noContent('Removed: credentials deleted, revocation requested.'), ...problems(409) } } },
    async (request, reply) => {
    const { ws, id } = request.params;
    await requireWorkspace(ws);
    if (id === FIRST_TIKTOK_ID) {
      throw new IngestError('conflict', `the TikTok destination is the workspace's forwarding setup: disconnect it with DELETE /admin/v1/workspaces/${ws}/connection`);
    }
    await disconnectDestination(deps, request.log, await requireDestination(ws, id), true);
    return reply.code(204).send();
    },
  );

  // ------------------------------------------------------------------ the destination's connection

  app.post<{ Params: Params }>('/admin/v1/workspaces/:ws/destinations/:id/connection', { schema: { response: { 200: authorizeSchema, ...problems(422, 503) } } }, async (request, reply) => {
    const { ws, id } = request.params;
    await requireWorkspace(ws);
    try {
      if (id === FIRST_TIKTOK_ID) {
        const started = await deps.flow.start(ws);
        return { authorize_url: started.startUrl, redirect_uri: deps.flow.redirectUri, expires_at: started.expiresAt.toISOString() };
      }
      const started = await deps.destinationFlow.start(await requireDestination(ws, id));
      return { authorize_url: started.startUrl, redirect_uri: deps.destinationFlow.redirectUri, expires_at: started.expiresAt.toISOString() };
    } catch (err) {
      if (err instanceof KindNotConnectableError) throw new IngestError('unprocessable', err.message);
      if (!(err instanceof PlatformNotConfiguredError || err instanceof MetaNotConfiguredError || err instanceof GoogleNotConfiguredError)) throw err;
      return sendConnectionProblem(request, reply as FastifyReply, deps.publicBaseUrl, CONNECTION_PROBLEMS.notConfigured, err.message);
    }
  });

  app.get<{ Params: Params }>('/admin/v1/workspaces/:ws/destinations/:id/connection', { schema: { response: { 200: connectionSchema } } }, async (request) => {
    const { ws, id } = request.params;
    await requireWorkspace(ws);
    if (id === FIRST_TIKTOK_ID) {
      const c = connectionView(await deps.connections.get(ws));
      return { status: c.status, account_id: c.advertiser_id, time_zone: c.time_zone, access_expires_at: c.access_expires_at, reason: c.reason };
    }
    const d = await requireDestination(ws, id);
    return { status: d.status, account_id: d.accountId, time_zone: d.timeZone, access_expires_at: iso(d.accessExpiresAt), reason: d.statusReason };
  });

  app.delete<{ Params: Params }>(
    '/admin/v1/workspaces/:ws/destinations/:id/connection',
    { schema: { response: { 204: noContent('Disconnected: credentials deleted, revocation requested.') } } },
    async (request, reply) => {
    const { ws, id } = request.params;
    await requireWorkspace(ws);
    if (id === FIRST_TIKTOK_ID) await disconnectWorkspace(deps, ws, 'admin', request.log);
    else await disconnectDestination(deps, request.log, await requireDestination(ws, id), false);
    return reply.code(204).send();
    },
  );
}
