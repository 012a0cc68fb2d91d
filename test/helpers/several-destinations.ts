/**
 * Several destinations per workspace, end to end over real HTTP, as scenarios run on each runtime (the embedded
 * default: test/e2e/several-destinations.test.ts; Kafka: test/integration/kafka-destinations.test.ts): the whole
 * service with the TikTok sandbox and the Meta and Google stand-ins.
 *  - the workspace's first TikTok destination (`/forwarding` + `/connection`), a second one for another advertiser
 *    connected through the destination flow, a Meta pixel and a Google Ads account: one purchase reaches all four,
 *    each exactly once; the second advertiser's pixel failing, or Google failing, delays none of the others, and it
 *    catches up without duplicates; a refused event is dead-lettered for that destination alone and redriven to it
 *    once;
 *  - a workspace with no forwarding setup and only a Meta destination still gets its conversions (live and test),
 *    and an event only a Meta destination selects reaches it without going to TikTok.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../services/compose/service.js';
import type { AdminClient } from './admin-client.js';
import { sendPurchase, startWithStandIns, type WithStandIns } from './destination-stand-ins.js';
import type { RunningGoogleSandbox } from '../sandbox/google/app.js';
import type { RunningMetaSandbox } from '../sandbox/meta/app.js';
import type { RunningSandbox } from '../sandbox/server.js';
import { connectThroughAdmin } from './service-with-sandbox.js';
import { eventually, sandboxControl } from './forwarder-rig.js';
import { SETUP } from './workspaces.js';

const META_PIXEL = '8888888888';
const SECOND_PIXEL = 'PIXEL_SECOND';
const FIRST_ADVERTISER = '7000000001';
const SECOND_ADVERTISER = '7000000002';

/** The scenarios on the service `env` selects (nothing: the embedded default in memory). */
export function severalDestinations(opts: { readonly name: string; readonly env?: () => Promise<Record<string, string>>; readonly timeoutMs?: number; readonly hangMs?: number }): void {
  let stand: WithStandIns;
  let tiktok: RunningSandbox;
  let meta: RunningMetaSandbox;
  let google: RunningGoogleSandbox;
  let service: RunningService;
  let admin: AdminClient;
  const within = opts.timeoutMs ?? 20_000;
  /** How long the failing pixel's calls hang: the others must have arrived before its first answer. */
  const hangMs = opts.hangMs ?? 3_000;

  beforeAll(async () => {
    stand = await startWithStandIns({ name: opts.name, pixels: [META_PIXEL], env: await opts.env?.() });
    ({ tiktok, meta, google, service, admin } = stand);
  }, 120_000);
  afterAll(() => stand?.close());

  const f = {
    /** An event sent through the gateway; its idempotency key is its event id. */
    send: (key: string, name = 'purchase'): Promise<string> => sendPurchase(stand.url, key, { pageLocation: 'https://shop.example/checkout?ttclid=TT1', name }),
    async tiktokReceived(id: string): Promise<Array<{ advertiser_id: string; event_source: string; event_source_id: string; record: any }>> {
      return (await sandboxControl(tiktok, `/received?event_id=${encodeURIComponent(id)}`)).events;
    },
    async metaReceived(id: string): Promise<Array<{ test_event_code?: string; event: Record<string, any> }>> {
      const r = (await (await fetch(`${meta.controlUrl}/received`)).json()) as { events: Array<{ test_event_code?: string; event: { event_id: string } }> };
      return r.events.filter((e) => e.event.event_id === id || e.event.event_id === `test:${id}`);
    },
    async googleReceived(id: string): Promise<Array<Record<string, any>>> {
      const r = (await (await fetch(`${google.controlUrl}/received`)).json()) as { events: Array<{ event: Record<string, any> }> };
      return r.events.map((e) => e.event).filter((e) => e.transactionId === id);
    },
    /** Every outbox has answered for this event: only then is "it arrived once" a finding. */
    async settled(workspace: string, id: string): Promise<void> {
      await eventually('every destination answered', async () => {
        const r = await service.db.query<{ n: unknown }>(
          `SELECT (SELECT count(*) FROM forward_outbox WHERE workspace_id = $1 AND event_id LIKE '%' || $2)
                + (SELECT count(*) FROM destination_outbox WHERE workspace_id = $1 AND event_id LIKE '%' || $2) AS n`,
          [workspace, id],
        );
        return Number(r.rows[0]!.n) === 0;
      }, within);
    },
    async createMeta(ws: string, setup: Record<string, unknown> = {}): Promise<string> {
      const m = await admin.call('POST', `/admin/v1/workspaces/${ws}/destinations`, {
        kind: 'meta',
        name: 'Meta',
        setup: { pixel_id: META_PIXEL, action_source: 'website', pii_mode: 'hashed', events: [{ name: 'purchase', platform_event: 'Purchase' }], ...setup },
      });
      expect(m.status, JSON.stringify(m.body)).toBe(201);
      await connectThroughAdmin(admin, `/admin/v1/workspaces/${ws}/destinations/${m.body.id}/connection`);
      return m.body.id;
    },
  };

  describe('a workspace with two TikTok destinations (two advertisers), a Meta one and a Google one', () => {
    let ws: string;
    let key: string;
    let second: string;
    let googleId: string;
    beforeAll(async () => {
      ws = (await admin.createWorkspace('two-tiktoks')).id;
      key = (await admin.createKey(ws, 'live')).key;
      expect((await admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, SETUP)).status).toBe(200);
      // Each authorization grants the advertisers the sandbox offers at that moment.
      await sandboxControl(tiktok, '/settings', { advertiser_ids: [FIRST_ADVERTISER], timezone: 'America/New_York' });
      await connectThroughAdmin(admin, `/admin/v1/workspaces/${ws}/connection`);
      const t = await admin.call('POST', `/admin/v1/workspaces/${ws}/destinations`, {
        kind: 'tiktok',
        name: 'TikTok (second advertiser)',
        setup: { event_source: 'WEB', event_source_id: SECOND_PIXEL, pii_mode: 'none', click_window_days: 7, events: [{ name: 'purchase', platform_event: 'Purchase' }] },
      });
      expect(t.status, JSON.stringify(t.body)).toBe(201);
      expect(t.body).toMatchObject({ kind: 'tiktok', status: 'disconnected', setup: { event_source_id: SECOND_PIXEL } });
      expect(t.body.id).not.toBe('tiktok');
      second = t.body.id;
      await sandboxControl(tiktok, '/settings', { advertiser_ids: [SECOND_ADVERTISER], timezone: 'Asia/Tokyo' });
      await connectThroughAdmin(admin, `/admin/v1/workspaces/${ws}/destinations/${second}/connection`);
      await f.createMeta(ws);
      const g = await admin.call('POST', `/admin/v1/workspaces/${ws}/destinations`, {
        kind: 'google',
        name: 'Google Ads',
        setup: { customer_id: '1234567890', conversion_action_id: '42', pii_mode: 'hashed', events: [{ name: 'purchase', platform_event: 'purchase' }] },
      });
      expect(g.status, JSON.stringify(g.body)).toBe(201);
      googleId = g.body.id;
      await connectThroughAdmin(admin, `/admin/v1/workspaces/${ws}/destinations/${googleId}/connection`);

      const list = await admin.call('GET', `/admin/v1/workspaces/${ws}/destinations`);
      expect(list.body.items.map((d: { kind: string; status: string; account_id: string }) => `${d.kind}:${d.status}`)).toEqual([
        'tiktok:connected',
        'tiktok:connected',
        'meta:connected',
        'google:connected',
      ]);
      const c = await admin.call('GET', `/admin/v1/workspaces/${ws}/destinations/${second}/connection`);
      expect(c.body).toMatchObject({ status: 'connected', account_id: SECOND_ADVERTISER, time_zone: 'Asia/Tokyo' });
    });

    it('one purchase reaches both advertisers, Meta and Google, each exactly once and in its own setup', async () => {
      const id = await f.send(key);
      const [first, other] = await eventually('both TikTok advertisers have it', async () => {
        const got = await f.tiktokReceived(id);
        const a = got.filter((e) => e.advertiser_id === FIRST_ADVERTISER);
        const b = got.filter((e) => e.advertiser_id === SECOND_ADVERTISER);
        return a.length > 0 && b.length > 0 && [a, b];
      });
      await eventually('Meta has it', async () => (await f.metaReceived(id)).length > 0);
      await eventually('Google has it', async () => (await f.googleReceived(id)).length > 0);
      await f.settled(ws, id);
      expect(first).toHaveLength(1);
      expect(other).toHaveLength(1);
      expect(await f.metaReceived(id)).toHaveLength(1);
      expect(await f.googleReceived(id)).toHaveLength(1);
      expect(first[0]).toMatchObject({ event_source_id: 'PIXEL123', record: { event: 'CompletePayment', user: { email: expect.any(Array) } } });
      // The second destination's own event name, pixel, pii_mode (none: no e-mail) and advertiser time zone.
      expect(other[0]).toMatchObject({ event_source: 'WEB', event_source_id: SECOND_PIXEL, record: { event: 'Purchase' } });
      expect(other[0]!.record.user?.email).toBeUndefined();
      expect(other[0]!.record.conversion_date_time).toMatch(/\+09:00$/);
      expect(first[0]!.record.conversion_date_time).toMatch(/-0[45]:00$/);
      const deliveries = await admin.call('GET', `/admin/v1/workspaces/${ws}/deliveries?event_id=${id}`);
      const which = (d: string) => (d === second ? 'second' : d === googleId ? 'google' : d === 'tiktok' ? 'tiktok' : 'meta');
      expect(deliveries.body.items.map((d: { destination: string; outcome: string }) => `${which(d.destination)}:${d.outcome}`).sort()).toEqual([
        'google:sent',
        'meta:sent',
        'second:sent',
        'tiktok:sent',
      ]);
    });

    it('Google failing delays neither TikTok advertiser nor Meta; it catches up without duplicates', async () => {
      // Every ingest call hangs, then fails with a 503, many times over.
      await fetch(`${google.controlUrl}/faults`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ingest: [{ http_status: 503, delay_ms: hangMs, times: 1000 }] }),
      });
      const t0 = Date.now();
      const ids = [await f.send(key), await f.send(key)];
      await eventually('both advertisers and Meta have both', async () => {
        const t = (await Promise.all(ids.map((id) => f.tiktokReceived(id)))).flat();
        const m = (await Promise.all(ids.map((id) => f.metaReceived(id)))).flat();
        return t.length === 4 && m.length === 2;
      }, hangMs * 3);
      expect(Date.now() - t0).toBeLessThan(hangMs); // before Google's first call even answered
      expect((await Promise.all(ids.map((id) => f.googleReceived(id)))).flat()).toHaveLength(0);

      await fetch(`${google.controlUrl}/faults`, { method: 'DELETE' });
      for (const id of ids) {
        await eventually('Google catches up', async () => (await f.googleReceived(id)).length > 0, 20_000);
        await f.settled(ws, id);
        expect(await f.googleReceived(id)).toHaveLength(1);
        expect(await f.tiktokReceived(id)).toHaveLength(2);
        expect(await f.metaReceived(id)).toHaveLength(1);
      }
    });

    it("the second advertiser's pixel failing delays neither the first nor Meta; it catches up without duplicates", async () => {
      // Every call for the second pixel hangs, then fails with a 503, many times over.
      await sandboxControl(tiktok, '/faults', { events: [{ event_source_id: SECOND_PIXEL, delay_ms: hangMs, http_status: 503, times: 1000 }] });
      const t0 = Date.now();
      const ids = [await f.send(key), await f.send(key)];
      await eventually('the first advertiser and Meta have both', async () => {
        const t = (await Promise.all(ids.map((id) => f.tiktokReceived(id)))).flat().filter((e) => e.advertiser_id === FIRST_ADVERTISER);
        const m = (await Promise.all(ids.map((id) => f.metaReceived(id)))).flat();
        return t.length === 2 && m.length === 2;
      }, hangMs * 3);
      expect(Date.now() - t0).toBeLessThan(hangMs); // before the failing pixel's first call even answered
      expect((await Promise.all(ids.map((id) => f.tiktokReceived(id)))).flat().filter((e) => e.advertiser_id === SECOND_ADVERTISER)).toHaveLength(0);

      await fetch(`${tiktok.controlUrl}/faults`, { method: 'DELETE' });
      for (const id of ids) {
        await eventually('the second advertiser catches up', async () => (await f.tiktokReceived(id)).some((e) => e.advertiser_id === SECOND_ADVERTISER), 20_000);
        await f.settled(ws, id);
        const got = await f.tiktokReceived(id);
        expect(got.filter((e) => e.advertiser_id === SECOND_ADVERTISER)).toHaveLength(1);
        expect(got.filter((e) => e.advertiser_id === FIRST_ADVERTISER)).toHaveLength(1);
        expect(await f.metaReceived(id)).toHaveLength(1);
      }
    });

    it('a purchase the second pixel refuses is its dead letter alone; redriven, it reaches that advertiser once', async () => {
      await sandboxControl(tiktok, '/faults', { events: [{ event_source_id: SECOND_PIXEL, code: 40002, message: 'data[0].event: Purchase is not enabled for this pixel', times: 1 }] });
      const id = await f.send(key);
      const letter = await eventually('the dead letter', async () => {
        const r = await admin.call('GET', `/admin/v1/workspaces/${ws}/dead-letters`);
        return (r.body.items as Array<{ id: string; event_id: string }>).find((l) => l.event_id === id);
      }, within);
      await f.settled(ws, id);
      expect((await admin.call('GET', `/admin/v1/workspaces/${ws}/deliveries?event_id=${id}&outcome=refused`)).body.items.map((d: { destination: string }) => d.destination)).toEqual([second]);
      expect((await f.tiktokReceived(id)).map((e) => e.advertiser_id)).toEqual([FIRST_ADVERTISER]);
      expect(letter).toBeDefined();

      expect(await admin.call('POST', `/admin/v1/workspaces/${ws}/deliveries/redrive`, { ids: [id] })).toMatchObject({ status: 202, body: { redriven: 1 } });
      await eventually('the second advertiser has it', async () => (await f.tiktokReceived(id)).some((e) => e.advertiser_id === SECOND_ADVERTISER), within);
      await f.settled(ws, id);
      expect((await f.tiktokReceived(id)).map((e) => e.advertiser_id).sort()).toEqual([FIRST_ADVERTISER, SECOND_ADVERTISER]);
      expect(await f.metaReceived(id)).toHaveLength(1);
    });

    it('disconnecting the second destination revokes its grant and leaves the first connected', async () => {
      const before = (await sandboxControl(tiktok, '/revocations')).count as number;
      expect((await admin.call('DELETE', `/admin/v1/workspaces/${ws}/destinations/${second}/connection`)).status).toBe(204);
      const after = await sandboxControl(tiktok, '/revocations');
      expect(after.count).toBe(before + 1);
      expect(after.revocations.at(-1)).toMatchObject({ outcome: 'revoked' });
      const list = await admin.call('GET', `/admin/v1/workspaces/${ws}/destinations`);
      expect(list.body.items.map((d: { id: string; status: string }) => d.status)).toEqual(['connected', 'disconnected', 'connected', 'connected']);
    });
  });

  describe('a workspace without a forwarding setup', () => {
    it('with only a Meta destination, its purchases and test purchases are built and forwarded; nothing waits for TikTok', async () => {
      const ws = (await admin.createWorkspace('meta-only')).id;
      const key = (await admin.createKey(ws, 'live')).key;
      const testKey = (await admin.createKey(ws, 'test')).key;
      await f.createMeta(ws, { test_event_code: 'TEST55' });
      const id = await f.send(key);
      const test = await f.send(testKey);
      const live = await eventually('Meta has the purchase', async () => (await f.metaReceived(id))[0], within);
      const tested = await eventually('Meta has the test purchase', async () => (await f.metaReceived(test))[0], within);
      expect(live.event).toMatchObject({ event_name: 'Purchase', user_data: { em: expect.any(Array) }, custom_data: { value: 30, currency: 'EUR' } });
      expect(tested.test_event_code).toBe('TEST55');
      await f.settled(ws, id);
      await f.settled(ws, test);
      const waiting = await service.db.query('SELECT 1 FROM forward_outbox WHERE workspace_id = $1', [ws]);
      expect(waiting.rows).toHaveLength(0);
      expect(await f.metaReceived(id)).toHaveLength(1);
      expect((await f.tiktokReceived(id))).toHaveLength(0);
    });

    it('an event only a Meta destination selects reaches Meta, not the TikTok destination', async () => {
      const ws = (await admin.createWorkspace('meta-extra')).id;
      const key = (await admin.createKey(ws, 'live')).key;
      expect((await admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, { ...SETUP, events: [{ name: 'purchase', platform_event: 'CompletePayment' }] })).status).toBe(200);
      await connectThroughAdmin(admin, `/admin/v1/workspaces/${ws}/connection`);
      await f.createMeta(ws, { events: [{ name: 'purchase', platform_event: 'Purchase' }, { name: 'sign_up', platform_event: 'CompleteRegistration' }] });
      const id = await f.send(key, 'sign_up');
      const got = await eventually('Meta has the sign-up', async () => (await f.metaReceived(id))[0], within);
      expect(got.event).toMatchObject({ event_name: 'CompleteRegistration' });
      await f.settled(ws, id);
      expect(await f.tiktokReceived(id)).toHaveLength(0);
      expect(await f.metaReceived(id)).toHaveLength(1);
    });
  });
}
