/**
 * Console: a workspace's destinations (README, "Console"). The list with each one's connection and recent
 * deliveries; a page per destination with its setup (checked by the admin API's parseSetup), its connection
 * (connect through the destination OAuth start link, disconnect), its removal and its deliveries (Activity's
 * section, filtered to it). The first TikTok destination (`tiktok`) is the workspace's Forwarding setup and
 * Connection: its page shows them and links to their pages. Access and audit as the other settings pages.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { audit } from '../../domain/audit-log.js';
import { DESTINATION_KINDS, type DestinationKindName } from '../../forwarder/destinations/kind.js';
import { KindNotConnectableError } from '../../forwarder/destinations/flow.js';
import { GoogleNotConfiguredError } from '../../forwarder/destinations/google.js';
import { MetaNotConfiguredError } from '../../forwarder/destinations/meta.js';
import type { Destination } from '../../forwarder/destinations/repo.js';
import { TIKTOK_DESTINATION_ID } from '../../forwarder/delivery-repo.js';
import { PlatformNotConfiguredError } from '../../forwarder/platform-client.js';
import { ForwardingRepo } from '../forwarding-repo.js';
import { connectionView } from '../routes/connection.js';
import { disconnectDestination } from '../routes/destinations.js';
import { UserRepo } from '../user-repo.js';
import { ActivityRepo } from './activity-repo.js';
import { readDeliveries, recentOutcomes, type DeliveryForm } from './deliveries-section.js';
import { blankSetup, destinationFromForm, sentence, eventRows, KIND_EVENTS, KIND_FIELDS, KIND_LABELS, type ParsedForm } from './destination-form.js';
import type { ConsoleWebDeps } from './deps.js';
import { renderPage } from './page.js';
import { accessCheck, ConsoleHttpError, redriveShown, STATUS_TEXT, type Access, type WsParams } from './settings-routes.js';
import { actorOf } from './sign-in-routes.js';

type IdParams = { Params: { ws: string; id: string } };
type FormBody = Record<string, string | string[] | undefined>;

/** The window of the list's outcome counts, as Activity's. */
const RECENT_DAYS = 7;

const one = (v: string | string[] | undefined): string => (Array.isArray(v) ? (v[0] ?? '') : (v ?? '')).trim();

export function destinationsRoutes(app: FastifyInstance, deps: ConsoleWebDeps): void {
  const access = accessCheck(new UserRepo(deps.db));
  const forwarding = new ForwardingRepo(deps.db);
  const activity = new ActivityRepo(deps.db);
  const base = (a: Access): string => `/console/w/${a.ws.workspaceId}/destinations`;

  /** Why a kind cannot be connected on this service (its variables unset), as the admin API says it; else null. */
  const notConfigured = (kind: DestinationKindName): string | null => {
    if (kind === 'meta' && !deps.meta.configured) return sentence(new MetaNotConfiguredError().message);
    if (kind === 'google' && !deps.google.configured) return sentence(new GoogleNotConfiguredError().message);
    if (kind === 'tiktok' && !deps.tiktok.configured) return sentence(new PlatformNotConfiguredError().message);
    return null;
  };

  const requireDestination = async (a: Access, id: string): Promise<Destination> => {
    const d = await deps.destinations.get(a.ws.workspaceId, id);
    if (!d) throw new ConsoleHttpError(404, 'This workspace has no such destination. It may have been removed.');
    return d;
  };

  // ---- the list ----
  app.get<WsParams>('/w/:ws/destinations', async (request, reply) => {
    const a = await access(request, reply);
    if (!a) return reply;
    const ws = a.ws.workspaceId;
    const recent = await recentOutcomes(deps.db, ws, RECENT_DAYS);
    const none = { counts: { sent: 0, refused: 0, retrying: 0, dead: 0 }, last: null };
    const items: Array<{ id: string; kind: DestinationKindName; name: string; status: keyof typeof STATUS_TEXT; account: string | null }> = [];
    if (await forwarding.get(ws)) {
      const c = connectionView(await deps.connections.get(ws));
      items.push({ id: TIKTOK_DESTINATION_ID, kind: 'tiktok', name: KIND_LABELS.tiktok, status: c.status, account: c.advertiser_id });
    }
    for (const d of await deps.destinations.list(ws)) items.push({ id: d.id, kind: d.kind, name: d.name, status: d.status, account: d.accountId });
    return renderPage(request, reply, 'destinations', {
      title: 'Destinations',
      ws: a.ws,
      tab: 'destinations',
      days: RECENT_DAYS,
      items: items.map((d) => ({ ...d, kindLabel: KIND_LABELS[d.kind], statusText: STATUS_TEXT[d.status], ...(recent.get(d.id) ?? none) })),
    });
  });

  // ---- adding one ----
  const newPage = async (request: FastifyRequest<WsParams>, reply: FastifyReply, a: Access, kind: DestinationKindName | null, form?: ParsedForm, status = 200) => {
    const seen = await activity.eventNames(a.ws.workspaceId);
    return renderPage(
      request,
      reply,
      'destination-new',
      {
        title: kind ? `Add a ${KIND_LABELS[kind]} destination` : 'Add a destination',
        ws: a.ws,
        tab: 'destinations',
        kind,
        kinds: DESTINATION_KINDS.map((k) => ({ value: k, label: KIND_LABELS[k], problem: notConfigured(k) })),
        ...(kind ? setupView(kind, form?.name ?? '', form?.shown ?? blankSetup(kind), seen, form?.errors ?? {}) : {}),
        problem: kind ? notConfigured(kind) : null,
        action: base(a),
      },
      status,
    );
  };

  app.get<WsParams & { Querystring: { kind?: string | string[] } }>('/w/:ws/destinations/new', async (request, reply) => {
    const a = await access(request, reply, { owner: true });
    if (!a) return reply;
    const kind = kindOf(one(request.query.kind));
    // The first TikTok destination is the workspace's forwarding setup: it is set up on Forwarding. A second one
    // (another advertiser) is a destination of its own, like Meta's and Google's.
    if (kind === 'tiktok' && !(await forwarding.get(a.ws.workspaceId))) {
      request.session.flash = 'The TikTok destination is this workspace\'s forwarding setup: choose its events and pixel here, then connect it on Connection.';
      return reply.redirect(`/console/w/${a.ws.workspaceId}/forwarding`, 303);
    }
    return newPage(request, reply, a, kind);
  });

  app.post<WsParams & { Body: FormBody }>('/w/:ws/destinations', async (request, reply) => {
    const a = await access(request, reply, { owner: true });
    if (!a) return reply;
    const kind = kindOf(one(request.body?.kind));
    if (kind === null) throw new ConsoleHttpError(400, 'Choose TikTok, Meta or Google Ads.');
    if (kind === 'tiktok' && !(await forwarding.get(a.ws.workspaceId))) {
      throw new ConsoleHttpError(400, 'The first TikTok destination is this workspace\'s Forwarding setup: set it up on Forwarding.');
    }
    const form = destinationFromForm(kind, request.body ?? {});
    if (!form.setup) return newPage(request, reply, a, kind, form, 400);
    const d = await deps.destinations.create(a.ws.workspaceId, kind, form.name, form.setup);
    await audit(deps.db, a.ws.workspaceId, 'destination.created', { destination: d.id, kind }, actorOf(a.user));
    request.session.flash = `Destination "${d.name}" added.${notConfigured(kind) ? '' : ' Connect it to start forwarding.'}`;
    return reply.redirect(`${base(a)}/${d.id}`, 303);
  });

  // ---- one destination ----
  const destinationPage = async (
    request: FastifyRequest<IdParams>,
    reply: FastifyReply,
    a: Access,
    extra: Record<string, unknown> = {},
    status = 200,
  ) => {
    const ws = a.ws.workspaceId;
    const id = request.params.id;
    const common = {
      ws: a.ws,
      tab: 'destinations',
      canRedrive: deps.deadLetters?.() !== undefined,
      deliveries: await readDeliveries(deps.db, ws, { ...((request.query ?? {}) as DeliveryForm), d_destination: id }),
      redriveAction: `${base(a)}/${encodeURIComponent(id)}/deliveries/redrive`,
      fixedDestination: id,
    };
    if (id === TIKTOK_DESTINATION_ID) {
      const setup = await forwarding.get(ws);
      if (!setup) throw new ConsoleHttpError(404, 'This workspace has no TikTok destination yet: set it up on Forwarding.');
      const c = connectionView(await deps.connections.get(ws));
      return renderPage(request, reply, 'destination-tiktok', { title: 'TikTok', ...common, setup, c, statusText: STATUS_TEXT[c.status], ...extra }, status);
    }
    const d = await requireDestination(a, id);
    const form = extra.form as ParsedForm | undefined;
    return renderPage(
      request,
      reply,
      'destination',
      {
        title: d.name,
        ...common,
        d,
        kindLabel: KIND_LABELS[d.kind],
        statusText: STATUS_TEXT[d.status],
        problem: notConfigured(d.kind),
        ...setupView(d.kind, form?.name ?? d.name, form?.shown ?? d.setup, await activity.eventNames(ws), form?.errors ?? {}),
        action: `${base(a)}/${d.id}`,
        ...extra,
      },
      status,
    );
  };

  app.get<IdParams & { Querystring: DeliveryForm }>('/w/:ws/destinations/:id', async (request, reply) => {
    const a = await access(request, reply);
    return a && destinationPage(request, reply, a);
  });

  app.post<IdParams & { Body: FormBody }>('/w/:ws/destinations/:id', async (request, reply) => {
    const a = await access(request, reply, { owner: true });
    if (!a) return reply;
    if (request.params.id === TIKTOK_DESTINATION_ID) return reply.redirect(`/console/w/${a.ws.workspaceId}/forwarding`, 303);
    const d = await requireDestination(a, request.params.id);
    const form = destinationFromForm(d.kind, request.body ?? {});
    if (!form.setup) return destinationPage(request, reply, a, { form }, 400);
    await deps.destinations.update(a.ws.workspaceId, d.id, form.name, form.setup);
    await audit(deps.db, a.ws.workspaceId, 'destination.updated', { destination: d.id, kind: d.kind }, actorOf(a.user));
    request.session.flash = `Setup saved: ${form.setup.events.length} event${form.setup.events.length === 1 ? '' : 's'} forwarded to "${form.name}".`;
    return reply.redirect(`${base(a)}/${d.id}`, 303);
  });

  app.post<IdParams>('/w/:ws/destinations/:id/connect', async (request, reply) => {
    const a = await access(request, reply, { owner: true });
    if (!a) return reply;
    const d = await requireDestination(a, request.params.id);
    try {
      const started = await deps.destinationFlow.start(d);
      await audit(deps.db, a.ws.workspaceId, 'destination.connection.started', { destination: d.id, kind: d.kind }, actorOf(a.user));
      // Through the service's own start link: it binds the flow to this browser (a cookie), then goes on to the platform.
      return reply.header('cache-control', 'no-store').redirect(started.startUrl, 303);
    } catch (err) {
      const refused = [MetaNotConfiguredError, GoogleNotConfiguredError, PlatformNotConfiguredError, KindNotConnectableError].some((c) => err instanceof c);
      if (!refused) throw err;
      return destinationPage(request, reply, a, { error: sentence((err as Error).message) }, 503);
    }
  });

  /** A confirmation page, then the change: disconnect (keep the destination) or remove it. */
  for (const step of ['disconnect', 'remove'] as const) {
    app.get<IdParams>(`/w/:ws/destinations/:id/${step}`, async (request, reply) => {
      const a = await access(request, reply, { owner: true });
      if (!a) return reply;
      const d = await requireDestination(a, request.params.id);
      const paragraphs =
        step === 'disconnect'
          ? [
              `The stored credentials of "${d.name}" are deleted, ${KIND_LABELS[d.kind]} is asked to revoke them, and nothing more is forwarded to it. Conversions waiting to be sent to it are dropped. Its setup stays: connect again at any time.`,
              `Access must also be removed on the platform side: remove this app's access in ${KIND_LABELS[d.kind]}'s business settings.`,
            ]
          : [
              `"${d.name}" is removed with its setup, its queue and its sent ledger; its credentials are deleted and ${KIND_LABELS[d.kind]} is asked to revoke them. This cannot be undone.`,
              'Its delivery records stay listed in Activity until they age out.',
            ];
      return renderPage(request, reply, 'confirm', {
        title: step === 'disconnect' ? 'Disconnect destination' : 'Remove destination',
        ws: a.ws,
        tab: 'destinations',
        heading: step === 'disconnect' ? `Disconnect "${d.name}"?` : `Remove "${d.name}"?`,
        paragraphs,
        action: `${base(a)}/${d.id}/${step}`,
        button: step === 'disconnect' ? 'Disconnect' : 'Remove destination',
        cancel: `${base(a)}/${d.id}`,
      });
    });

    app.post<IdParams>(`/w/:ws/destinations/:id/${step}`, async (request, reply) => {
      const a = await access(request, reply, { owner: true });
      if (!a) return reply;
      const d = await requireDestination(a, request.params.id);
      await disconnectDestination(deps, request.log, d, step === 'remove');
      await audit(deps.db, a.ws.workspaceId, step === 'remove' ? 'destination.removed' : 'destination.disconnected', { destination: d.id, kind: d.kind }, actorOf(a.user));
      if (step === 'remove') {
        request.session.flash = `Destination "${d.name}" removed.`;
        return reply.redirect(base(a), 303);
      }
      request.session.flash = `"${d.name}" disconnected. Remember to remove the access on the platform side as well.`;
      return reply.redirect(`${base(a)}/${d.id}`, 303);
    });
  }

  app.post<IdParams & { Body: DeliveryForm & { d?: string | string[] } }>('/w/:ws/destinations/:id/deliveries/redrive', async (request, reply) => {
    const a = await access(request, reply, { owner: true });
    if (!a) return reply;
    const id = request.params.id;
    if (id !== TIKTOK_DESTINATION_ID) await requireDestination(a, id);
    return redriveShown(deps, request, reply, a, `${base(a)}/${encodeURIComponent(id)}`);
  });
}

const kindOf = (v: string): DestinationKindName | null => ((DESTINATION_KINDS as readonly string[]).includes(v) ? (v as DestinationKindName) : null);

/** What the setup form of a kind shows: its fields with their values and problems, and the event rows. */
function setupView(
  kind: DestinationKindName,
  name: string,
  setup: Record<string, unknown>,
  seen: ReadonlyArray<{ name: string; count: number }>,
  errors: Record<string, string>,
) {
  const selected = Array.isArray(setup.events) ? (setup.events as Array<{ name: string; platform_event: string }>) : [];
  return {
    name,
    fields: KIND_FIELDS[kind].map((f) => ({ ...f, value: setup[f.key] === undefined || setup[f.key] === null || Number.isNaN(setup[f.key]) ? '' : String(setup[f.key]) })),
    rows: eventRows(seen, selected),
    suggestions: KIND_EVENTS[kind],
    errors,
    errorCount: Object.keys(errors).length,
  };
}
