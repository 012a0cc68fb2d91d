/**
 * Delivery records over the admin API, end to end: the whole service on the embedded default with the platforms'
 * stand-ins (helpers/destination-stand-ins.ts). A workspace forwarding purchases to TikTok and Meta: its deliveries
 * listed with filters and pages, bad filters refused naming the field, and a refused delivery redriven once,
 * reaching Meta once.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../services/compose/service.js';
import type { AdminClient } from '../helpers/admin-client.js';
import { sendPurchase, startWithStandIns, type WithStandIns } from '../helpers/destination-stand-ins.js';
import type { RunningMetaSandbox } from '../sandbox/meta/app.js';
import type { RunningSandbox } from '../sandbox/server.js';
import { connectThroughAdmin } from '../helpers/service-with-sandbox.js';
import { eventually, receivedBySandbox } from '../helpers/forwarder-rig.js';
import { SETUP } from '../helpers/workspaces.js';

const PIXEL = '8888888888';
let stand: WithStandIns;
let tiktok: RunningSandbox;
let meta: RunningMetaSandbox;
let service: RunningService;
let url: string;
let admin: AdminClient;
let ws: string;
let key: string;
let metaId: string;

beforeAll(async () => {
  stand = await startWithStandIns({ name: 'deliveries-e2e', pixels: [PIXEL] });
  ({ tiktok, meta, service, url, admin } = stand);
  ws = (await admin.createWorkspace('deliveries')).id;
  key = (await admin.createKey(ws, 'live')).key;
  expect((await admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, SETUP)).status).toBe(200);
  await connect(`/admin/v1/workspaces/${ws}/connection`);
  const m = await admin.call('POST', `/admin/v1/workspaces/${ws}/destinations`, {
    kind: 'meta',
    name: 'Meta',
    setup: { pixel_id: PIXEL, action_source: 'website', pii_mode: 'hashed', events: [{ name: 'purchase', platform_event: 'Purchase' }] },
  });
  expect(m.status).toBe(201);
  metaId = m.body.id;
  await connect(`/admin/v1/workspaces/${ws}/destinations/${metaId}/connection`);
});
afterAll(() => stand?.close());
afterEach(async () => {
  await fetch(`${meta.controlUrl}/faults`, { method: 'DELETE' });
});

const connect = (path: string): Promise<void> => connectThroughAdmin(admin, path);

const send = (): Promise<string> => sendPurchase(url, key);
const deliveries = (query = '') => admin.call('GET', `/admin/v1/workspaces/${ws}/deliveries${query}`);
type Item = { event_id: string; destination: string; outcome: string; attempts: number; match_quality: number; match_keys: string[]; platform_answer: any; sent_at: string | null };
async function settled(id: string, outcome = 'sent'): Promise<Item[]> {
  return eventually(`both deliveries of ${id} ${outcome}`, async () => {
    const items = (await deliveries(`?event_id=${id}`)).body.items as Item[];
    return items.length === 2 && items.every((i) => i.outcome === outcome) ? items : undefined;
  });
}
const metaCopies = async (id: string) =>
  ((await (await fetch(`${meta.controlUrl}/received`)).json()) as { events: Array<{ event: { event_id: string } }> }).events.filter((e) => e.event.event_id === id).length;

describe('GET /admin/v1/workspaces/{ws}/deliveries', () => {
  it('lists a delivered purchase per destination with its outcome, answer, match keys and match quality', async () => {
    const id = await send();
    const items = await settled(id);
    const byDest = new Map(items.map((i) => [i.destination, i]));
    expect(byDest.get('tiktok')).toMatchObject({
      event_id: id,
      outcome: 'sent',
      attempts: 1,
      match_keys: expect.arrayContaining(['ttclid', 'email']),
      platform_answer: { http_status: 200, code: 0 },
      sent_at: expect.any(String),
    });
    expect(byDest.get('tiktok')!.match_quality).toBeGreaterThanOrEqual(6.5);
    expect(byDest.get(metaId)).toMatchObject({ event_id: id, outcome: 'sent', match_keys: expect.arrayContaining(['email', 'fbc']) });
    expect(byDest.get(metaId)!.match_quality).toBeGreaterThanOrEqual(5);
    expect((await receivedBySandbox(tiktok)).filter((e) => e.event_id === id)).toHaveLength(1);
  });

  it('filters by destination, outcome and time, and pages with a cursor', async () => {
    const ids = [await send(), await send(), await send()];
    for (const id of ids) await settled(id);
    const since = new Date(Date.now() - 60_000).toISOString();
    const onlyMeta = (await deliveries(`?destination=${metaId}&outcome=sent&from=${since}`)).body.items as Item[];
    expect(onlyMeta.every((i) => i.destination === metaId && i.outcome === 'sent')).toBe(true);
    expect(onlyMeta.map((i) => i.event_id)).toEqual(expect.arrayContaining(ids));
    expect((await deliveries(`?outcome=dead`)).body.items).toEqual([]);
    expect((await deliveries(`?to=${encodeURIComponent('2020-01-01T00:00:00Z')}`)).body.items).toEqual([]);

    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const r = await deliveries(`?destination=tiktok&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(r.status).toBe(200);
      seen.push(...(r.body.items as Item[]).map((i) => i.event_id));
      cursor = r.body.next;
      pages++;
    } while (cursor !== null && pages < 10);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual(expect.arrayContaining(ids));
    expect(pages).toBeGreaterThanOrEqual(2);
  });

  describe('bad input', () => {
    it.each([
      ['an unknown outcome', '?outcome=lost', 'outcome'],
      ['a from that is not RFC 3339', '?from=yesterday', 'from'],
      ['a limit of 0', '?limit=0', 'limit'],
      ['a limit that is not a number', '?limit=ten', 'limit'],
      // The admin API's schema errors name the part for an unknown member.
      ['an unknown parameter', '?status=dead', 'querystring must NOT have additional properties'],
      ['a destination with a slash', '?destination=a%2Fb', 'destination'],
    ])('%s: 400 problem naming the field', async (_name, query, field) => {
      const r = await deliveries(query);
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.detail).toContain(field);
    });

    it.each([
      ['a to before from', '?from=2026-11-22T00:00:00Z&to=2026-11-21T00:00:00Z', 'querystring.to'],
      ['a cursor of another list', '?cursor=bm9wZQ', 'querystring.cursor'],
    ])('%s: 422 naming the field (each value valid, together or here meaningless)', async (_name, query, field) => {
      const r = await deliveries(query);
      expect(r.status, JSON.stringify(r.body)).toBe(422);
      expect(r.body.detail).toContain(field);
    });

    it('an unknown workspace: 404', async () => {
      expect((await admin.call('GET', '/admin/v1/workspaces/ws_nope/deliveries')).status).toBe(404);
    });
  });
});

describe('POST /admin/v1/workspaces/{ws}/deliveries/redrive', () => {
  it('a refused delivery goes again once: it reaches Meta once, and a second redrive sends nothing', async () => {
    await fetch(`${meta.controlUrl}/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ events: [{ pixel_id: PIXEL, http_status: 400, code: 100, error_subcode: 2804003, message: 'Invalid parameter', times: 1 }] }),
    });
    const id = await send();
    const refused = await eventually('Meta refused it', async () => {
      const [item] = (await deliveries(`?event_id=${id}&destination=${metaId}`)).body.items as Item[];
      return item?.outcome === 'refused' ? item : undefined;
    });
    expect(refused.platform_answer).toMatchObject({ code: 100, message: expect.stringContaining('Invalid parameter') });
    expect(await metaCopies(id)).toBe(0);
    // Already sent to TikTok: not redrivable there.
    await eventually('TikTok sent it', async () => ((await deliveries(`?event_id=${id}&destination=tiktok`)).body.items as Item[])[0]?.outcome === 'sent');

    const r = await admin.call('POST', `/admin/v1/workspaces/${ws}/deliveries/redrive`, { ids: [id] });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    expect(r.body).toEqual({ redriven: 1 });
    const sent = await eventually('the redriven delivery was sent', async () => {
      const [item] = (await deliveries(`?event_id=${id}&destination=${metaId}`)).body.items as Item[];
      return item?.outcome === 'sent' ? item : undefined;
    });
    expect(sent.attempts).toBe(2);
    expect(await metaCopies(id)).toBe(1);

    const again = await admin.call('POST', `/admin/v1/workspaces/${ws}/deliveries/redrive`, { outcome: 'refused', destination: metaId });
    expect(again.body).toEqual({ redriven: 0 });
    const waiting = await service.db.query('SELECT 1 FROM destination_outbox WHERE event_id = $1', [id]);
    expect(waiting.rows).toEqual([]);
    expect(await metaCopies(id)).toBe(1);
    expect((await receivedBySandbox(tiktok)).filter((e) => e.event_id === id)).toHaveLength(1);

    const audit = await service.db.query<{ actor: string; detail: { redriven: number } }>(
      `SELECT actor, detail FROM audit_log WHERE workspace_id = $1 AND action = 'deliveries.redriven' ORDER BY id`,
      [ws],
    );
    expect(audit.rows.map((a) => [a.actor, a.detail.redriven])).toEqual([
      ['admin', 1],
      ['admin', 0],
    ]);
  });

  describe('bad input', () => {
    it.each([
      ['an empty body', {}, 'body'],
      ['ids that are not a list', { ids: 'order-1' }, 'ids'],
      ['ids and a filter together', { ids: ['order-1'], outcome: 'dead' }, 'body'],
      ['an outcome that is never redriven', { outcome: 'sent' }, 'outcome'],
      ['a from that is not RFC 3339', { from: 'now' }, 'from'],
      ['an unknown field', { all: true }, 'body must NOT have additional properties'],
    ])('%s: 400 naming it, nothing redriven', async (_name, body, field) => {
      const r = await admin.call('POST', `/admin/v1/workspaces/${ws}/deliveries/redrive`, body);
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.detail).toContain(field);
    });
  });
});
