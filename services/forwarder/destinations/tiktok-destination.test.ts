/**
 * A second TikTok destination's connection and tokens, against the TikTok sandbox: connected through the
 * destination flow (authorization code with PKCE), its access token renewed with its (rotating) refresh token when
 * the platform refuses it and in the background before it expires, and parked for re-authorisation when the grant
 * is gone. The workspace's first TikTok destination is untouched throughout.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { authorizeInSandbox, conversion, sandboxControl, startRig, type ForwarderRig } from '../../../test/helpers/forwarder-rig.js';
import { DEFAULT_ADVERTISER_IDS } from '../../../test/sandbox/state.js';
import type { ConversionReady } from '../../domain/conversion.js';
import type { Destination } from './repo.js';
import { tiktokDestinationKind } from './tiktok.js';

const PIXEL = 'PIXEL_TWO';
const ADVERTISER = '7100000002';
const setup = {
  event_source: 'WEB',
  event_source_id: PIXEL,
  pii_mode: 'hashed',
  click_window_days: 7,
  events: [{ name: 'purchase', platform_event: 'Purchase' }],
};

describe('tiktokDestinationKind', () => {
  const record = conversion('ws', { record: { event_time: Date.UTC(2030, 0, 1, 12) / 1000, user: { email: ['a'.repeat(64)], ttclid: 'T', user_agent: 'UA' } } }).record;
  const kind = (over: Partial<typeof setup> = {}, tz: string | null = 'Asia/Tokyo') =>
    tiktokDestinationKind(null as never, { ...setup, ...over } as never, tz);
  const group = { eventSource: '', eventSourceId: PIXEL, testEventCode: '' };
  it('sends under its own event source, pixel and advertiser time zone', () => {
    const body = kind({ event_source: 'APP' }).request(group, [{ eventId: 'e', record }]);
    expect(body).toMatchObject({ event_source: 'APP', event_source_id: PIXEL, data: [{ conversion_date_time: '2030-01-01 21:00:00+09:00', user: { email: ['a'.repeat(64)] } }] });
  });
  it('pii_mode none: no e-mail, phone or external id; the click id and user agent stay', () => {
    const body = kind({ pii_mode: 'none' }).request(group, [{ eventId: 'e', record }]);
    expect(body.data[0]).toMatchObject({ user: { ttclid: 'T', user_agent: 'UA' } });
    expect((body.data[0] as typeof record).user).not.toHaveProperty('email');
  });
  it('without a time zone yet, the record keeps the one enrich wrote', () => {
    expect(kind({}, null).request(group, [{ eventId: 'e', record }]).data[0]).toMatchObject({ conversion_date_time: record.conversion_date_time });
  });
});

describe('a second TikTok destination', () => {
  let rig: ForwarderRig;
  beforeAll(async () => {
    rig = await startRig({ env: { FORWARDER_LINGER_MS: '0' } });
  });
  afterAll(() => rig?.close());
  afterEach(async () => {
    await sandboxControl(rig.sandbox, '/reset', {});
  });

  /** The browser's part of the destination flow, done by the rig. */
  async function connect(d: Destination): Promise<Awaited<ReturnType<ForwarderRig['platform']['destinationFlow']['complete']>>> {
    const flow = rig.platform.destinationFlow;
    const { startUrl } = await flow.start(d);
    const state = new URL(startUrl).searchParams.get('state')!;
    const bound = await flow.bind(state, 'rig-browser');
    if (!bound.ok) throw new Error(bound.message);
    expect(new URL(bound.authorizeUrl).searchParams.get('code_challenge_method')).toBe('S256');
    const back = await authorizeInSandbox(bound.authorizeUrl);
    const result = await flow.complete(back, 'rig-browser');
    // The callback is claimed once.
    expect(await flow.complete(back, 'rig-browser')).toMatchObject({ ok: false, reason: 'unknown_state' });
    return result;
  }

  /** A workspace with its first TikTok destination and a second one for another advertiser, both connected. */
  async function workspace(): Promise<{ ws: string; d: Destination }> {
    const ws = await rig.workspace();
    expect(await rig.connect(ws)).toMatchObject({ ok: true });
    const created = await rig.platform.destinations.create(ws, 'tiktok', 'TikTok two', setup);
    await sandboxControl(rig.sandbox, '/settings', { advertiser_ids: [ADVERTISER], timezone: 'Europe/Berlin' });
    expect(await connect(created)).toMatchObject({ ok: true, destinationId: created.id, accountId: ADVERTISER });
    const d = (await rig.platform.destinations.byId(created.id))!;
    expect(d).toMatchObject({ status: 'connected', accountId: ADVERTISER, timeZone: 'Europe/Berlin' });
    return { ws, d };
  }
  const purchase = (ws: string): ConversionReady => conversion(ws, { event_name: 'purchase' });
  const receivedByAdvertiser = async (id: string) =>
    ((await sandboxControl(rig.sandbox, `/received?event_id=${id}`)).events as Array<{ advertiser_id: string; event_source_id: string }>).map((e) => `${e.advertiser_id} ${e.event_source_id}`);
  async function forward(ws: string, d: Destination, c: ConversionReady): Promise<void> {
    await rig.append([c]);
    await rig.intake.drain();
    await rig.platform.sender!.drain(ws);
    await rig.platform.destinationSender!.drain(d.id);
  }
  const refreshCalls = async () => (await sandboxControl(rig.sandbox, '/calls?endpoint=refresh')).count as number;

  it('forwards to its own advertiser and pixel beside the first one', async () => {
    const { ws, d } = await workspace();
    const c = purchase(ws);
    await forward(ws, d, c);
    expect((await receivedByAdvertiser(c.event_id)).sort()).toEqual([`${DEFAULT_ADVERTISER_IDS[0]} PIXEL123`, `${ADVERTISER} ${PIXEL}`]);
  });

  it('an access token the platform refuses is renewed with the rotating refresh token, again and again', async () => {
    const { ws, d } = await workspace();
    for (let round = 0; round < 2; round++) {
      await sandboxControl(rig.sandbox, '/expire-access-tokens', {});
      const before = await refreshCalls();
      const c = purchase(ws);
      await rig.append([c]);
      await rig.intake.drain();
      await rig.platform.destinationSender!.drain(d.id);
      expect(await receivedByAdvertiser(c.event_id)).toEqual([`${ADVERTISER} ${PIXEL}`]);
      // One refresh per round: the rotated refresh token was kept (the old one no longer works).
      expect(await refreshCalls()).toBe(before + 1);
      expect((await rig.platform.destinations.byId(d.id))!.status).toBe('connected');
    }
  });

  it('renews a token that expires soon in the background, without traffic', async () => {
    await sandboxControl(rig.sandbox, '/settings', { access_ttl_seconds: 120 });
    const { d } = await workspace();
    const expiresBefore = (await rig.platform.destinations.byId(d.id))!.accessExpiresAt!.getTime();
    const before = await refreshCalls();
    await sandboxControl(rig.sandbox, '/settings', { access_ttl_seconds: 86_400 });
    await rig.platform.destinationSender!.refreshDue(Date.now() + 3_600_000);
    expect(await refreshCalls()).toBe(before + 1);
    expect((await rig.platform.destinations.byId(d.id))!.accessExpiresAt!.getTime()).toBeGreaterThan(expiresBefore + 3_600_000);
  });

  it('a grant the platform ended turns it needs_reauth; its conversions wait and go once it is connected again', async () => {
    const { ws, d } = await workspace();
    await sandboxControl(rig.sandbox, '/revoke-all', {});
    const c = purchase(ws);
    await rig.append([c]);
    await rig.intake.drain();
    await rig.platform.destinationSender!.drain(d.id);
    const parked = (await rig.platform.destinations.byId(d.id))!;
    expect(parked).toMatchObject({ status: 'needs_reauth', statusReason: expect.stringMatching(/token refresh refused: 4010[58]/) });
    expect(await receivedByAdvertiser(c.event_id)).toEqual([]);
    await sandboxControl(rig.sandbox, '/settings', { advertiser_ids: [ADVERTISER] });
    expect(await connect(parked)).toMatchObject({ ok: true });
    await rig.platform.destinationSender!.drain(d.id);
    expect(await receivedByAdvertiser(c.event_id)).toEqual([`${ADVERTISER} ${PIXEL}`]);
  });
});
