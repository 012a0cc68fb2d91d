/**
 * Replays end to end on the embedded default, over real HTTP: the whole service in this process, the platform
 * sandbox as the platform. Purchases sent before forwarding was set up are delivered by a replay; a second replay
 * sends nothing; a dry run counts and sends nothing; `resend` sends again once; another workspace's events are never
 * read; bad input gets problem documents.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webEvent } from '../helpers/factories.js';
import { eventually, receivedBySandbox } from '../helpers/forwarder-rig.js';
import { outboxEmptied } from '../helpers/outbox.js';
import { SETUP, startServiceWithSandbox, type ServiceWithSandbox } from '../helpers/service-with-sandbox.js';

const ADMIN = 'replay-e2e-admin-token';
let svc: ServiceWithSandbox;

beforeAll(async () => {
  svc = await startServiceWithSandbox(ADMIN, { RAW_LOG_RETENTION_DAYS: '2' });
});
afterAll(async () => {
  await svc?.close();
});

async function replay(ws: string, body: Record<string, unknown>): Promise<any> {
  const started = await svc.admin.call('POST', `/admin/v1/workspaces/${ws}/replays`, body);
  expect(started.status, JSON.stringify(started.body)).toBe(202);
  expect(started.body.status).toBe('queued');
  return eventually(
    'the replay finished',
    async () => {
      const r = await svc.admin.call('GET', `/admin/v1/workspaces/${ws}/replays/${started.body.id}`);
      return ['done', 'failed', 'cancelled'].includes(r.body.status) ? r.body : undefined;
    },
    20_000,
  );
}

const receivedFor = async (ids: ReadonlySet<string>): Promise<string[]> =>
  (await receivedBySandbox(svc.sandbox)).map((e) => e.event_id).filter((id) => ids.has(id));

describe('replay', () => {
  it('delivers purchases sent before forwarding was set up, once, and a second replay sends nothing', async () => {
    const { ws, key } = await svc.bareWorkspace('replay');
    const other = await svc.bareWorkspace('other');
    const from = new Date(Date.now() - 60_000).toISOString();
    const purchases = [webEvent(), webEvent(), webEvent()];
    await svc.send(key, [...purchases, webEvent({ event_name: 'page_view' })]);
    await svc.send(other.key, [webEvent(), webEvent()]);
    await svc.drained();
    const ids = new Set(purchases.map((p) => p.event_metadata.idempotency_key));
    await svc.setUpForwarding(ws);
    await svc.setUpForwarding(other.ws);
    const to = new Date(Date.now() + 60_000).toISOString();
    expect(await receivedFor(ids)).toEqual([]);

    const dry = await replay(ws, { from, to, dry_run: true });
    expect(dry).toMatchObject({ status: 'done', dry_run: true, progress: 1, events_read: 4, conversions_built: 3, conversions_sent: 3, skipped_already_sent: 0 });
    expect(dry.dropped).toEqual({ not_selected: 1 });
    // The dry run filed nothing: with the outbox empty, nothing can still be on its way.
    await outboxEmptied(svc.service.db, ws);
    expect(await receivedFor(ids)).toEqual([]);

    const first = await replay(ws, { from, to });
    // Only this workspace's events are read: the other's two purchases are not.
    expect(first).toMatchObject({ status: 'done', events_read: 4, conversions_built: 3, conversions_sent: 3, skipped_already_sent: 0, error: null });
    const got = await eventually('the platform received the replayed purchases', async () => {
      const r = await receivedFor(ids);
      return r.length >= 3 ? r : undefined;
    });
    expect(new Set(got)).toEqual(ids);
    expect(got).toHaveLength(3);

    const second = await replay(ws, { from, to });
    expect(second).toMatchObject({ status: 'done', events_read: 4, conversions_built: 3, conversions_sent: 0, skipped_already_sent: 3 });
    await outboxEmptied(svc.service.db, ws);
    expect(await receivedFor(ids)).toHaveLength(3);

    // The other workspace's purchases were never replayed.
    const otherIds = new Set((await receivedBySandbox(svc.sandbox)).map((e) => e.record.event_id as string));
    expect([...otherIds].filter((id) => !ids.has(id))).toEqual([]);
  });

  it('sends delivered conversions again with resend, once per replay', async () => {
    const { ws, key } = await svc.connectedWorkspace('resend');
    const from = new Date(Date.now() - 60_000).toISOString();
    const purchases = [webEvent(), webEvent()];
    const ids = new Set(purchases.map((p) => p.event_metadata.idempotency_key));
    await svc.send(key, purchases);
    await eventually('live delivery', async () => (await receivedFor(ids)).length >= 2);
    const to = new Date(Date.now() + 60_000).toISOString();

    const plain = await replay(ws, { from, to });
    expect(plain).toMatchObject({ conversions_sent: 0, skipped_already_sent: 2 });
    const again = await replay(ws, { from, to, resend: true });
    expect(again).toMatchObject({ status: 'done', conversions_sent: 2, skipped_already_sent: 0 });
    await eventually('the resent conversions', async () => (await receivedFor(ids)).length >= 4);
    await outboxEmptied(svc.service.db, ws);
    expect(await receivedFor(ids)).toHaveLength(4);
    // The resend refreshed the ledger: a plain replay now skips them again.
    expect(await replay(ws, { from, to })).toMatchObject({ conversions_sent: 0, skipped_already_sent: 2 });
  });

  it('counts conversions parked before the workspace connects, then already queued, and they arrive once connected', async () => {
    const { ws, key } = await svc.bareWorkspace('parked');
    const from = new Date(Date.now() - 60_000).toISOString();
    const purchases = [webEvent(), webEvent()];
    const ids = new Set(purchases.map((p) => p.event_metadata.idempotency_key));
    await svc.send(key, purchases);
    await svc.drained();
    expect((await svc.admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, SETUP)).status).toBe(200);
    const to = new Date(Date.now() + 60_000).toISOString();

    const parked = await replay(ws, { from, to });
    expect(parked).toMatchObject({
      status: 'done', conversions_built: 2, conversions_parked: 2, conversions_queued: 0, conversions_sent: 0,
      skipped_already_sent: 0, skipped_already_queued: 0, dropped: {},
    });
    const again = await replay(ws, { from, to });
    expect(again).toMatchObject({
      status: 'done', conversions_built: 2, conversions_parked: 0, conversions_queued: 0, conversions_sent: 0,
      skipped_already_queued: 2, dropped: {},
    });

    await svc.setUpForwarding(ws);
    await eventually('the parked conversions delivered', async () => (await receivedFor(ids)).length >= 2);
    await outboxEmptied(svc.service.db, ws);
    expect((await receivedFor(ids)).sort()).toEqual([...ids].sort());
    const afterConnect = await replay(ws, { from, to });
    expect(afterConnect).toMatchObject({ conversions_parked: 0, conversions_queued: 0, skipped_already_sent: 2, skipped_already_queued: 0 });
  });

  it('lists jobs, cancels only what is still running, and refuses bad input with problem documents', async () => {
    const { ws } = await svc.bareWorkspace('jobs');
    const from = new Date(Date.now() - 60_000).toISOString();
    const to = new Date().toISOString();
    const done = await replay(ws, { from, to });
    expect(done.status).toBe('done');
    const list = await svc.admin.call('GET', `/admin/v1/workspaces/${ws}/replays`);
    expect(list.status).toBe(200);
    expect(list.body.items.map((j: { id: string }) => j.id)).toEqual([done.id]);

    const cancelDone = await svc.admin.call('DELETE', `/admin/v1/workspaces/${ws}/replays/${done.id}`);
    expect(cancelDone.status).toBe(409);
    expect(cancelDone.body.detail).toContain('done');

    const bad = async (body: unknown, status: number, detail: RegExp): Promise<void> => {
      const r = await svc.admin.call('POST', `/admin/v1/workspaces/${ws}/replays`, body);
      expect(r.status, JSON.stringify(r.body)).toBe(status);
      expect(r.body.detail).toMatch(detail);
    };
    await bad({ from, to: from }, 422, /must be before/); // each time valid, the range empty
    await bad({ to }, 400, /from/);
    await bad({ from: 'yesterday', to }, 400, /from/);
    await bad({ from, to, dry_run: 'yes' }, 400, /dry_run/);
    await bad({ from, to, extra: 1 }, 400, /extra|additional/);
    const old = new Date(Date.now() - 3 * 86_400_000).toISOString();
    const r = await svc.admin.call('POST', `/admin/v1/workspaces/${ws}/replays`, { from: old, to });
    expect(r.status).toBe(422);
    expect(r.body.type).toMatch(/\/problems\/out-of-retention$/);
    expect(r.body.detail).toMatch(/RAW_LOG_RETENTION_DAYS=2.*oldest time still held is \d{4}-\d\d-\d\dT/);

    expect((await svc.admin.call('POST', `/admin/v1/workspaces/ws_nope/replays`, { from, to })).status).toBe(404);
    expect((await svc.admin.call('GET', `/admin/v1/workspaces/${ws}/replays/rpl_nope`)).status).toBe(404);
    expect((await svc.admin.call('DELETE', `/admin/v1/workspaces/${ws}/replays/rpl_nope`)).status).toBe(404);
    const stranger = await svc.bareWorkspace('stranger');
    expect((await svc.admin.call('GET', `/admin/v1/workspaces/${stranger.ws}/replays/${done.id}`)).status).toBe(404);
    const noAuth = await fetch(`${svc.url}/admin/v1/workspaces/${ws}/replays`, { method: 'POST' });
    expect(noAuth.status).toBe(401);
  });
});
