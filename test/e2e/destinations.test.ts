/**
 * Destinations end to end over real HTTP: the whole service on the embedded default, with the TikTok sandbox, the
 * Meta stand-in and the Google stand-in. One workspace with a TikTok, a Meta and a Google destination, each
 * connected in a browser-like flow; a purchase goes to all three in each platform's shape, with each platform's
 * consent rules and only its own click id.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../services/compose/service.js';
import type { AdminClient } from '../helpers/admin-client.js';
import { sendPurchase, startWithStandIns, type WithStandIns } from '../helpers/destination-stand-ins.js';
import type { RunningGoogleSandbox } from '../sandbox/google/app.js';
import type { RunningMetaSandbox } from '../sandbox/meta/app.js';
import type { RunningSandbox } from '../sandbox/server.js';
import { connectThroughAdmin } from '../helpers/service-with-sandbox.js';
import { sha256, webEvent } from '../helpers/factories.js';
import { eventually, receivedBySandbox } from '../helpers/forwarder-rig.js';
import { SETUP } from '../helpers/workspaces.js';

const PIXEL = '7777777777';
let stand: WithStandIns;
let tiktok: RunningSandbox;
let meta: RunningMetaSandbox;
let google: RunningGoogleSandbox;
let service: RunningService;
let url: string;
let admin: AdminClient;

beforeAll(async () => {
  stand = await startWithStandIns({ name: 'destinations-e2e', pixels: [PIXEL] });
  ({ tiktok, meta, google, service, url, admin } = stand);
});
afterAll(() => stand?.close());

const connect = (path: string): Promise<void> => connectThroughAdmin(admin, path);

describe('a workspace with a TikTok, a Meta and a Google destination', () => {
  let key: string;
  beforeAll(async () => {
    const ws = (await admin.createWorkspace('three-destinations')).id;
    key = (await admin.createKey(ws, 'live')).key;
    expect((await admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, SETUP)).status).toBe(200);
    await connect(`/admin/v1/workspaces/${ws}/connection`);
    const m = await admin.call('POST', `/admin/v1/workspaces/${ws}/destinations`, {
      kind: 'meta',
      name: 'Meta',
      setup: { pixel_id: PIXEL, action_source: 'website', pii_mode: 'hashed', events: [{ name: 'purchase', platform_event: 'Purchase' }] },
    });
    const g = await admin.call('POST', `/admin/v1/workspaces/${ws}/destinations`, {
      kind: 'google',
      name: 'Google Ads',
      setup: { customer_id: '1234567890', conversion_action_id: '42', pii_mode: 'hashed', events: [{ name: 'purchase', platform_event: 'purchase' }] },
    });
    expect([m.status, g.status]).toEqual([201, 201]);
    await connect(`/admin/v1/workspaces/${ws}/destinations/${m.body.id}/connection`);
    await connect(`/admin/v1/workspaces/${ws}/destinations/${g.body.id}/connection`);
    const list = await admin.call('GET', `/admin/v1/workspaces/${ws}/destinations`);
    expect(list.body.items.map((d: { kind: string; status: string }) => `${d.kind}:${d.status}`)).toEqual(['tiktok:connected', 'meta:connected', 'google:connected']);
  });

  const send = (consent: Record<string, string> = {}): Promise<string> =>
    sendPurchase(url, key, { pageLocation: 'https://shop.example/checkout?ttclid=TT1&fbclid=FB1&gclid=GC1', consent });
  const metaEvents = async () => ((await (await fetch(`${meta.controlUrl}/received`)).json()) as { events: Array<{ event: Record<string, any> }> }).events.map((e) => e.event);
  const googleEvents = async () => ((await (await fetch(`${google.controlUrl}/received`)).json()) as { events: Array<{ event: Record<string, any> }> }).events.map((e) => e.event);

  it('one purchase reaches all three, each in its own shape with only its own click id', async () => {
    const id = await send();
    const t = await eventually('TikTok has it', async () => (await receivedBySandbox(tiktok)).find((e) => e.event_id === id)?.record);
    const m = await eventually('Meta has it', async () => (await metaEvents()).find((e) => e.event_id === id));
    const g = await eventually('Google has it', async () => (await googleEvents()).find((e) => e.transactionId === id));
    expect(t).toMatchObject({ event: 'CompletePayment', user: { ttclid: 'TT1' } });
    expect(m).toMatchObject({
      event_name: 'Purchase',
      action_source: 'website',
      event_source_url: 'https://shop.example/checkout?fbclid=FB1',
      user_data: { em: [sha256('jane@example.com')], fbc: expect.stringMatching(/^fb\.1\.\d+\.FB1$/) },
      custom_data: { value: 30, currency: 'EUR' },
      data_processing_options: [],
    });
    expect(g).toMatchObject({ adIdentifiers: { gclid: 'GC1' }, consent: { adUserData: 'CONSENT_GRANTED' }, conversionValue: 30, currency: 'EUR' });
    expect(JSON.stringify(m)).not.toMatch(/TT1|GC1/);
    expect(JSON.stringify(g)).not.toMatch(/TT1|FB1/);
  });

  it('ad_user_data denied: Meta gets nothing, Google gets the click without user data and the consent, TikTok as its rules say', async () => {
    const id = await send({ ad_user_data: 'DENIED' });
    const t = await eventually('TikTok has it', async () => (await receivedBySandbox(tiktok)).find((e) => e.event_id === id)?.record);
    const g = await eventually('Google has it', async () => (await googleEvents()).find((e) => e.transactionId === id));
    expect(t.user?.email).toBeUndefined();
    expect(g).toMatchObject({ adIdentifiers: { gclid: 'GC1' }, consent: { adUserData: 'CONSENT_DENIED' } });
    expect(g).not.toHaveProperty('userData');
    // Meta's copy was queued, then withheld by Meta's consent rule when its batch came up: never sent.
    await eventually('Meta\'s copy settled', async () => (await service.db.query("SELECT 1 FROM destination_outbox o JOIN destinations d ON d.id = o.destination_id WHERE d.kind = 'meta' AND o.event_id = $1", [id])).rows.length === 0);
    expect(await service.db.query('SELECT 1 FROM destination_sent WHERE event_id = $1', [id])).toMatchObject({ rows: [{}] }); // Google's ledger only
    expect((await metaEvents()).find((e) => e.event_id === id)).toBeUndefined();
  });
});
