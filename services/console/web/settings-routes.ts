/**
 * Console: a workspace's settings (API Key, Forwarding, Connection) and its Activity (with its Deliveries). Every route checks that the
 * signed-in user is a member of the workspace in the URL (else 404: another workspace's existence is not revealed);
 * changes need the owner role and are audited with the user as actor.
 */
import { Ajv } from 'ajv';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { PlatformNotConfiguredError } from '../../forwarder/platform-client.js';
import { describeError } from '../../gateway/validation/validate.js';
import { audit } from '../../domain/audit-log.js';
import type { ForwardingSetupInput } from '../../domain/forwarding-setup.js';
import { ForwardingRepo } from '../forwarding-repo.js';
import { LEGACY_PLATFORM_EVENTS, PLATFORM_EVENT_SOURCES, STANDARD_PLATFORM_EVENTS } from '../platform-events.js';
import { connectionView, disconnectWorkspace } from '../routes/connection.js';
import { repeatedEventName, setupBody } from '../routes/forwarding.js';
import { UserRepo, type ConsoleUser, type Membership } from '../user-repo.js';
import { WorkspaceRepo } from '../workspace-repo.js';
import { ExplanationRepo } from '../../privacy/explanations.js';
import { ActivityRepo, deliveredChart } from './activity-repo.js';
import { eventRows, eventsFromForm } from './destination-form.js';
import { backQuery, deliveryIdsOf, readDeliveries, type DeliveryForm } from './deliveries-section.js';
import type { ConsoleWebDeps } from './deps.js';
import { renderPage } from './page.js';
import { actorOf } from './sign-in-routes.js';

export type WsParams = { Params: { ws: string } };
export interface Access {
  readonly user: ConsoleUser;
  readonly ws: Membership;
}

export class ConsoleHttpError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
  ) {
    super(message);
  }
}

const ACTIVITY_DAYS = 7;
export const STATUS_TEXT = { connected: 'connected', needs_reauth: 'needs re-authorisation', disconnected: 'disconnected' } as const;
const validateSetup = new Ajv({ allErrors: false, strict: false }).compile(setupBody);

/** The signed-in member's access to the URL's workspace: redirects to sign-in when signed out; 404 for a workspace not theirs. */
export function accessCheck(users: UserRepo) {
  return async function access(
    request: FastifyRequest<WsParams>,
    reply: FastifyReply,
    opts: { owner?: boolean } = {},
  ): Promise<Access | undefined> {
    const user = request.session.user;
    if (!user) {
      await reply.redirect('/console', 303);
      return undefined;
    }
    const ws = await users.membership(user.id, request.params.ws);
    if (!ws) throw new ConsoleHttpError(404, `There is no workspace ${request.params.ws} among yours. Pick one from your workspaces.`);
    if (opts.owner && ws.role !== 'owner') throw new ConsoleHttpError(403, 'Only owners of this workspace can change this.');
    return { user, ws };
  };
}

export function settingsRoutes(app: FastifyInstance, deps: ConsoleWebDeps): void {
  const users = new UserRepo(deps.db);
  const keys = new WorkspaceRepo(deps.db);
  const forwarding = new ForwardingRepo(deps.db);
  const activity = new ActivityRepo(deps.db);

  const access = accessCheck(users);

  app.get<WsParams>('/w/:ws', async (request, reply) => reply.redirect(`/console/w/${encodeURIComponent(request.params.ws)}/api-key`, 303));

  // ---- API Key ----
  const keysPage = async (request: FastifyRequest<WsParams>, reply: FastifyReply, a: Access, extra: Record<string, unknown> = {}, status = 200) =>
    renderPage(request, reply, 'api-key', { title: 'API Key', ws: a.ws, tab: 'api-key', keys: await keys.listApiKeys(a.ws.workspaceId), ...extra }, status);

  app.get<WsParams>('/w/:ws/api-key', async (request, reply) => {
    const a = await access(request, reply);
    return a && keysPage(request, reply, a);
  });

  app.post<WsParams & { Body: { name?: string; mode?: string } }>('/w/:ws/api-key', async (request, reply) => {
    const a = await access(request, reply, { owner: true });
    if (!a) return reply;
    const name = (request.body?.name ?? '').trim();
    const mode = request.body?.mode ?? 'live';
    if (mode !== 'live' && mode !== 'test') return keysPage(request, reply, a, { error: 'Mode must be one of live, test.' }, 400);
    if (name.length === 0 || name.length > 100) return keysPage(request, reply, a, { error: 'Name: give 1 to 100 characters, e.g. "checkout server".' }, 400);
    // Rendered in this answer and nowhere else: the whole key is shown this once.
    const created = await keys.createApiKey(a.ws.workspaceId, mode, name, actorOf(a.user));
    return keysPage(request, reply, a, { created });
  });

  app.get<{ Params: { ws: string; id: string } }>('/w/:ws/api-key/:id/revoke', async (request, reply) => {
    const a = await access(request, reply, { owner: true });
    if (!a) return reply;
    const key = (await keys.listApiKeys(a.ws.workspaceId)).find((k) => k.id === request.params.id && !k.revoked);
    if (!key) throw new ConsoleHttpError(404, 'No such active key in this workspace.');
    return renderPage(request, reply, 'confirm', {
      title: 'Revoke key',
      ws: a.ws,
      tab: 'api-key',
      heading: `Revoke key "${key.name || key.displayStart}"?`,
      paragraphs: [
        `Requests with the ${key.mode} key starting ${key.displayStart}… are refused (401) within 5 seconds. This cannot be undone.`,
        'Events it sent before stay accepted.',
      ],
      action: `/console/w/${a.ws.workspaceId}/api-key/${key.id}/revoke`,
      button: 'Revoke key',
      cancel: `/console/w/${a.ws.workspaceId}/api-key`,
    });
  });

  app.post<{ Params: { ws: string; id: string } }>('/w/:ws/api-key/:id/revoke', async (request, reply) => {
    const a = await access(request, reply, { owner: true });
    if (!a) return reply;
    if (!(await keys.revokeApiKey(a.ws.workspaceId, request.params.id, actorOf(a.user)))) throw new ConsoleHttpError(404, 'No such key in this workspace.');
    request.session.flash = 'Key revoked.';
    return reply.redirect(`/console/w/${a.ws.workspaceId}/api-key`, 303);
  });

  // ---- Forwarding ----
  const forwardingPage = async (
    request: FastifyRequest<WsParams>,
    reply: FastifyReply,
    a: Access,
    shown: ForwardingSetupInput | undefined,
    extra: Record<string, unknown> = {},
    status = 200,
  ) => {
    const setup = shown ?? (await forwarding.get(a.ws.workspaceId)) ?? {
      event_source: 'WEB',
      event_source_id: '',
      pii_mode: 'hashed' as const,
      click_window_days: 7,
      test_event_code: null,
      events: [],
    };
    const seen = await activity.eventNames(a.ws.workspaceId);
    const rows = eventRows(seen, setup.events);
    return renderPage(
      request,
      reply,
      'forwarding',
      {
        title: 'Forwarding',
        ws: a.ws,
        tab: 'forwarding',
        setup,
        rows,
        standard: STANDARD_PLATFORM_EVENTS,
        legacy: LEGACY_PLATFORM_EVENTS,
        sources: PLATFORM_EVENT_SOURCES,
        ...extra,
      },
      status,
    );
  };

  app.get<WsParams>('/w/:ws/forwarding', async (request, reply) => {
    const a = await access(request, reply);
    return a && forwardingPage(request, reply, a, undefined);
  });

  app.post<WsParams & { Body: Record<string, string | string[] | undefined> }>('/w/:ws/forwarding', async (request, reply) => {
    const a = await access(request, reply, { owner: true });
    if (!a) return reply;
    const { input, problem } = setupFromForm(request.body ?? {});
    if (problem) return forwardingPage(request, reply, a, input, { error: problem }, 400);
    await forwarding.put(a.ws.workspaceId, input, actorOf(a.user));
    request.session.flash = `Forwarding saved: ${input.events.length} event${input.events.length === 1 ? '' : 's'} forwarded.`;
    return reply.redirect(`/console/w/${a.ws.workspaceId}/forwarding`, 303);
  });

  // ---- Connection ----
  const connectionPage = async (request: FastifyRequest<WsParams>, reply: FastifyReply, a: Access, extra: Record<string, unknown> = {}, status = 200) => {
    const c = connectionView(await deps.connections.get(a.ws.workspaceId));
    return renderPage(request, reply, 'connection', { title: 'Connection', ws: a.ws, tab: 'connection', c, statusText: STATUS_TEXT[c.status], ...extra }, status);
  };

  app.get<WsParams>('/w/:ws/connection', async (request, reply) => {
    const a = await access(request, reply);
    return a && connectionPage(request, reply, a);
  });

  app.post<WsParams>('/w/:ws/connection/connect', async (request, reply) => {
    const a = await access(request, reply, { owner: true });
    if (!a) return reply;
    try {
      const started = await deps.flow.start(a.ws.workspaceId);
      await audit(deps.db, a.ws.workspaceId, 'connection.started', {}, actorOf(a.user));
      // Through the service's own connect link: it binds the flow to this browser (a cookie), then goes on to the platform.
      return reply.header('cache-control', 'no-store').redirect(started.startUrl, 303);
    } catch (err) {
      if (!(err instanceof PlatformNotConfiguredError)) throw err;
      return connectionPage(request, reply, a, { error: err.message }, 503);
    }
  });

  app.get<WsParams>('/w/:ws/connection/disconnect', async (request, reply) => {
    const a = await access(request, reply, { owner: true });
    if (!a) return reply;
    return renderPage(request, reply, 'confirm', {
      title: 'Disconnect ad account',
      ws: a.ws,
      tab: 'connection',
      heading: 'Disconnect the ad account?',
      paragraphs: [
        'The stored credentials are deleted, the platform is asked to revoke them, and conversions stop being forwarded. Conversions waiting to be sent are dropped.',
        "Access must also be removed on the platform side: remove this app's access in the ad account's settings on the platform.",
      ],
      action: `/console/w/${a.ws.workspaceId}/connection/disconnect`,
      button: 'Disconnect',
      cancel: `/console/w/${a.ws.workspaceId}/connection`,
    });
  });

  app.post<WsParams>('/w/:ws/connection/disconnect', async (request, reply) => {
    const a = await access(request, reply, { owner: true });
    if (!a) return reply;
    await disconnectWorkspace(deps, a.ws.workspaceId, actorOf(a.user), request.log);
    request.session.flash = 'Ad account disconnected. Remember to remove the access on the platform side as well.';
    return reply.redirect(`/console/w/${a.ws.workspaceId}/connection`, 303);
  });

  // ---- Activity ----
  const explanations = new ExplanationRepo(deps.db, deps.explanationRetentionMs ?? 30 * 24 * 3600_000);
  app.get<WsParams & { Querystring: { event_id?: string | string[] } & DeliveryForm }>('/w/:ws/activity', async (request, reply) => {
    const a = await access(request, reply);
    if (!a) return reply;
    const data = await activity.read(a.ws.workspaceId, ACTIVITY_DAYS);
    // "Why this field" of one conversion (docs/privacy.md), looked up by its event id.
    const whyId = one(request.query.event_id).slice(0, 512);
    const why = whyId === '' ? null : await explanations.get(a.ws.workspaceId, whyId);
    return renderPage(request, reply, 'activity', {
      title: 'Activity',
      ws: a.ws,
      tab: 'activity',
      days: ACTIVITY_DAYS,
      chart: deliveredChart(data.daily),
      ...data,
      whyId,
      why,
      whyRetentionDays: Math.round((deps.explanationRetentionMs ?? 30 * 24 * 3600_000) / 86_400_000),
      canRedrive: deps.deadLetters?.() !== undefined,
      deliveries: await readDeliveries(deps.db, a.ws.workspaceId, request.query),
    });
  });

  // "Redrive shown" of the Deliveries section: the dead and refused among the shown records, audited as this user.
  app.post<WsParams & { Body: DeliveryForm & { d?: string | string[] } }>('/w/:ws/activity/deliveries/redrive', async (request, reply) => {
    const a = await access(request, reply, { owner: true });
    return a && redriveShown(deps, request, reply, a, `/console/w/${a.ws.workspaceId}/activity`);
  });

  // Dead letters back through their stage under today's setup: the admin API's redrive, audited as this user.
  app.post<WsParams & { Body: { id?: string | string[]; all?: string } }>('/w/:ws/activity/dead-letters/redrive', async (request, reply) => {
    const a = await access(request, reply, { owner: true });
    if (!a) return reply;
    const letters = deps.deadLetters?.();
    if (!letters) throw new ConsoleHttpError(503, 'Redriving is not available in this process; use the admin API.');
    const ids = idsOf(request.body?.id);
    const all = one(request.body?.all) === '1';
    if (!all && ids.length === 0) {
      request.session.flash = 'Tick the dead letters to send again, or use "Redrive all".';
      return reply.redirect(`/console/w/${a.ws.workspaceId}/activity`, 303);
    }
    const r = await letters.redrive(a.ws.workspaceId, all ? { all: true } : { ids }, actorOf(a.user));
    request.session.flash =
      'refused' in r
        ? `Nothing was sent again: ${r.refused}.`
        : `${r.redriven} dead letter${r.redriven === 1 ? '' : 's'} sent again.` +
          (r.failed.length > 0 ? ` ${r.failed.length} could not go back and stay listed: ${r.failed.slice(0, 3).map((f) => f.error).join('; ')}.` : '');
    return reply.redirect(`/console/w/${a.ws.workspaceId}/activity`, 303);
  });
}

/** "Redrive shown": the dead and refused among the shown delivery records sent again, audited as the user; back to `page`. */
export async function redriveShown(
  deps: ConsoleWebDeps,
  request: FastifyRequest<{ Body: DeliveryForm & { d?: string | string[] } }>,
  reply: FastifyReply,
  a: Access,
  page: string,
): Promise<FastifyReply> {
  const letters = deps.deadLetters?.();
  if (!letters) throw new ConsoleHttpError(503, 'Redriving is not available in this process; use the admin API.');
  const back = `${page}${backQuery(request.body ?? {})}#deliveries`;
  const ids = deliveryIdsOf(request.body?.d);
  if (ids.length === 0) {
    request.session.flash = 'No dead or refused delivery is shown: nothing to send again.';
    return reply.redirect(back, 303);
  }
  const r = await letters.redriveDeliveries(a.ws.workspaceId, ids, actorOf(a.user));
  request.session.flash =
    `${r.redriven} deliver${r.redriven === 1 ? 'y' : 'ies'} sent again.` +
    (r.failed.length > 0 ? ` ${r.failed.length} could not go back: ${r.failed.slice(0, 3).map((f) => f.error).join('; ')}.` : '');
  return reply.redirect(back, 303);
}

/** The dead letter ids a form sent (one checkbox or several), each a plausible id. */
function idsOf(v: string | string[] | undefined): string[] {
  return (Array.isArray(v) ? v : v === undefined ? [] : [v]).map((id) => id.trim()).filter((id) => /^[A-Za-z0-9_-]{1,64}$/.test(id));
}

const one = (v: string | string[] | undefined): string => (Array.isArray(v) ? (v[0] ?? '') : (v ?? '')).trim();

/** The Forwarding form as the admin API's setup body, checked by the same schema. */
export function setupFromForm(body: Record<string, string | string[] | undefined>): { input: ForwardingSetupInput; problem?: string } {
  const { events, problems: missing } = eventsFromForm(body);
  const problems = [...missing.values()];
  const testCode = one(body.test_event_code);
  const input: ForwardingSetupInput = {
    event_source: one(body.event_source),
    event_source_id: one(body.event_source_id),
    pii_mode: one(body.pii_mode) as ForwardingSetupInput['pii_mode'],
    click_window_days: /^\d+$/.test(one(body.click_window_days)) ? Number(one(body.click_window_days)) : Number.NaN,
    test_event_code: testCode === '' ? null : testCode,
    events,
  };
  if (problems.length > 0) return { input, problem: problems.join(' ') };
  if (!validateSetup(input)) {
    const first = validateSetup.errors?.[0];
    return { input, problem: first ? `${describeError(first).message}.` : 'The setup is not valid.' };
  }
  const repeated = repeatedEventName(events);
  if (repeated !== undefined) return { input, problem: `"${repeated}" is listed more than once.` };
  return { input };
}
