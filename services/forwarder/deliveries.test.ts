import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { conversion, sandboxControl, startRig, type ForwarderRig } from '../../test/helpers/forwarder-rig.js';
import { META_APP, metaServiceEnv, startMetaSandbox, type RunningMetaSandbox } from '../../test/sandbox/meta/app.js';
import type { ConversionReady } from '../domain/conversion.js';
import { connectMeta, metaMatch } from './destinations/meta.js';
import { googleMatch } from './destinations/google.js';
import { tiktokMatch } from './destinations/tiktok.js';
import type { Delivery } from './delivery-repo.js';
import { deliveriesStep } from '../privacy/erasure-steps.js';
import { DeadLetterRepo } from '../datateam/dead-letter-repo.js';
import { redriveDeliveries } from '../datateam/delivery-redrive.js';
import { Redriver } from '../datateam/redrive.js';
import { writeForwardingSetup } from '../domain/forwarding-setup.js';
import { SETUP } from '../../test/helpers/workspaces.js';

const H = 'd'.repeat(64);
const PIXEL = '333333';

describe('match quality, per kind', () => {
  it.each([
    ['tiktok: click id and user agent', tiktokMatch({ user: { ttclid: 'E.C.P', user_agent: 'UA' } }), ['ttclid', 'user_agent'], 4.5],
    ['tiktok: everything', tiktokMatch({ user: { ttclid: 'x', email: [H], phone: [H], external_id: [H], user_agent: 'UA' } }), ['ttclid', 'email', 'phone', 'external_id', 'user_agent'], 10],
    ['tiktok: nothing', tiktokMatch({ user: { email: [] } }), [], 0],
    ['meta: e-mail, fbc and user agent', metaMatch({ user_data: { em: [H], fbc: 'fb.1.1.x', client_user_agent: 'UA' } }), ['email', 'fbc', 'user_agent'], 5.5],
    ['meta: every key', metaMatch({ user_data: { em: [H], ph: [H], external_id: [H], fbc: 'f', fbp: 'p', client_user_agent: 'UA' } }), ['email', 'phone', 'fbc', 'external_id', 'fbp', 'user_agent'], 10],
    ['google: gclid and e-mail', googleMatch({ adIdentifiers: { gclid: 'G' }, userData: { userIdentifiers: [{ emailAddress: H }] } }), ['gclid', 'email'], 9],
    ['google: phone only', googleMatch({ userData: { userIdentifiers: [{ phoneNumber: H }] } }), ['phone'], 1],
  ])('%s', (_name, score, keys, quality) => {
    expect(score).toEqual({ keys, quality });
  });
});

describe('delivery records', () => {
  let rig: ForwarderRig;
  let meta: RunningMetaSandbox;
  beforeAll(async () => {
    meta = await startMetaSandbox({ pixels: [PIXEL] });
    rig = await startRig({
      env: {
        FORWARDER_BATCH_SIZE: '10',
        FORWARDER_LINGER_MS: '0',
        ...metaServiceEnv(meta),
      },
    });
  });
  afterAll(async () => {
    await rig?.close();
    await meta?.close();
  });
  afterEach(async () => {
    await fetch(`${rig.sandbox.controlUrl}/faults`, { method: 'DELETE' });
    await fetch(`${meta.controlUrl}/faults`, { method: 'DELETE' });
  });

  /** A workspace connected to TikTok and to one Meta destination that forwards `purchase`. */
  async function workspace(): Promise<{ ws: string; dst: string }> {
    const ws = await rig.workspace();
    expect(await rig.connect(ws)).toMatchObject({ ok: true });
    const d = await rig.platform.destinations.create(ws, 'meta', 'Meta', {
      pixel_id: PIXEL,
      action_source: 'website',
      pii_mode: 'hashed',
      events: [{ name: 'purchase', platform_event: 'Purchase' }],
    });
    const res = await fetch(`${meta.authUrl}?${new URLSearchParams({ client_id: META_APP.id, redirect_uri: 'http://127.0.0.1:9/cb', state: 's' })}`, { redirect: 'manual' });
    const grant = await connectMeta(rig.platform.metaClient, new URL(res.headers.get('location')!).searchParams.get('code')!, 'http://127.0.0.1:9/cb', PIXEL);
    if ('error' in grant) throw new Error(grant.error);
    await rig.platform.destinations.storeConnected(d.id, grant);
    return { ws, dst: d.id };
  }
  const purchase = (ws: string, over: { event_time?: number; event?: string } = {}): ConversionReady =>
    conversion(ws, {
      event_name: 'purchase',
      record: {
        user: { email: [H], user_agent: 'Mozilla/5.0', ttclid: 'T1' },
        page: { url: 'https://shop.example/c?fbclid=FB1&ttclid=T1' },
        properties: { value: 30, currency: 'EUR' },
        ...over,
      },
    });
  async function deliver(ws: string, dst: string, cs: ConversionReady[]): Promise<void> {
    await rig.append(cs);
    await rig.intake.drain();
    await sendOnce(ws, dst);
  }
  /** One drain of each path, backoff cleared first. */
  async function sendOnce(ws: string, dst: string): Promise<void> {
    await rig.db.query('UPDATE connections SET send_not_before = NULL WHERE workspace_id = $1', [ws]);
    await rig.db.query('UPDATE destinations SET send_not_before = NULL WHERE id = $1', [dst]);
    await rig.platform.sender!.drain(ws);
    await rig.platform.destinationSender!.drain(dst);
  }
  /** The next request of each path answers 503. */
  async function failOnceEach(): Promise<void> {
    await sandboxControl(rig.sandbox, '/faults', { events: [{ http_status: 503, times: 1 }] });
    await fetch(`${meta.controlUrl}/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ events: [{ pixel_id: PIXEL, http_status: 503, code: 2, message: 'Service temporarily unavailable', times: 1 }] }),
    });
  }
  async function records(ws: string): Promise<Map<string, Delivery>> {
    const list = await rig.platform.deliveries.list(ws, {}, { limit: 100 });
    return new Map(list.map((d) => [`${d.destination === 'tiktok' ? 'tiktok' : 'meta'} ${d.eventId}`, d]));
  }

  it('after a send: each path records the payload as sent, the answer, the match keys and their score', async () => {
    const { ws, dst } = await workspace();
    const c = purchase(ws);
    await deliver(ws, dst, [c]);
    const got = await records(ws);
    expect(got.size).toBe(2);
    const t = got.get(`tiktok ${c.event_id}`)!;
    expect(t).toMatchObject({ destination: 'tiktok', kind: 'tiktok', outcome: 'sent', attempts: 1, matchKeys: ['ttclid', 'email', 'user_agent'], matchQuality: 7 });
    expect(t.payload).toEqual(JSON.parse(JSON.stringify(c.record)));
    expect(t.platformAnswer).toMatchObject({ http_status: 200, code: 0, message: 'OK' });
    expect(t.sentAt).not.toBeNull();
    const m = got.get(`meta ${c.event_id}`)!;
    expect(m).toMatchObject({ destination: dst, kind: 'meta', outcome: 'sent', attempts: 1, matchKeys: ['email', 'fbc', 'user_agent'], matchQuality: 5.5 });
    expect(m.payload).toMatchObject({ event_name: 'Purchase', event_id: c.event_id, user_data: { em: [H], fbc: `fb.1.${c.record.event_time * 1000}.FB1` } });
    expect(m.platformAnswer).toMatchObject({ http_status: 200, code: 0 });
    // Of the conversion, each record keeps the identifiers an erasure matches on, not a second copy of the rest.
    const kept = await rig.db.query<{ record: unknown }>('SELECT record FROM deliveries WHERE workspace_id = $1', [ws]);
    expect(kept.rows.map((r) => (typeof r.record === 'string' ? JSON.parse(r.record) : r.record))).toEqual([
      { user: { email: [H], ttclid: 'T1' } },
      { user: { email: [H], ttclid: 'T1' } },
    ]);
  });

  it('after a partial failure: the refused event has the platform\'s message, the others are sent', async () => {
    const { ws, dst } = await workspace();
    const good = [purchase(ws), purchase(ws)];
    // TikTok refuses an unknown event name; Meta refuses an event older than 7 days.
    const badTiktok = conversion(ws, { event_name: 'other', record: { event: 'NotAPlatformEvent' } });
    const badMeta = purchase(ws, { event_time: Math.floor(Date.now() / 1000) - 8 * 86_400 });
    await deliver(ws, dst, [good[0]!, badTiktok, badMeta, good[1]!]);
    // The TikTok path isolates its bad record over several requests, one drain each.
    for (let i = 0; i < 5; i++) await sendOnce(ws, dst);
    const got = await records(ws);
    for (const c of good) {
      expect(got.get(`tiktok ${c.event_id}`)?.outcome).toBe('sent');
      expect(got.get(`meta ${c.event_id}`)?.outcome).toBe('sent');
    }
    const t = got.get(`tiktok ${badTiktok.event_id}`)!;
    expect(t.outcome).toBe('refused');
    expect(t.platformAnswer).toMatchObject({ code: 40002, message: expect.stringContaining('unknown event name') });
    expect(t.attempts).toBeGreaterThan(1); // it went in the whole batch first
    const m = got.get(`meta ${badMeta.event_id}`)!;
    expect(m.outcome).toBe('refused');
    expect(m.platformAnswer).toMatchObject({ code: 100, message: expect.stringContaining('7 days') });
    expect(got.get(`tiktok ${badMeta.event_id}`)?.outcome).toBe('sent');
  });

  it('after a retry: retrying with the platform\'s answer, then sent with two attempts', async () => {
    const { ws, dst } = await workspace();
    await failOnceEach();
    const c = purchase(ws);
    await deliver(ws, dst, [c]);
    let got = await records(ws);
    expect(got.get(`tiktok ${c.event_id}`)).toMatchObject({ outcome: 'retrying', attempts: 1, platformAnswer: { http_status: 503 }, sentAt: null });
    expect(got.get(`meta ${c.event_id}`)).toMatchObject({ outcome: 'retrying', attempts: 1, platformAnswer: { http_status: 503, code: 2 }, sentAt: null });
    await sendOnce(ws, dst);
    got = await records(ws);
    expect(got.get(`tiktok ${c.event_id}`)).toMatchObject({ outcome: 'sent', attempts: 2, platformAnswer: { http_status: 200 } });
    expect(got.get(`meta ${c.event_id}`)).toMatchObject({ outcome: 'sent', attempts: 2, platformAnswer: { http_status: 200 } });
  });

  it('a conversion that waited too long after a failed attempt is dead; old records are purged with the ledger', async () => {
    const { ws, dst } = await workspace();
    await sandboxControl(rig.sandbox, '/faults', { events: [{ http_status: 503, times: 1 }] });
    const c = purchase(ws);
    await rig.append([c]);
    await rig.intake.drain();
    await rig.platform.sender!.drain(ws);
    expect((await records(ws)).get(`tiktok ${c.event_id}`)?.outcome).toBe('retrying');
    await rig.db.query(`UPDATE forward_outbox SET enqueued_at = now() - interval '2000 hours' WHERE workspace_id = $1`, [ws]);
    await rig.platform.outbox.expireOld(rig.config.forwarder.parkMaxAgeMs);
    expect((await records(ws)).get(`tiktok ${c.event_id}`)?.outcome).toBe('dead');

    await rig.platform.destinationSender!.drain(dst);
    expect((await records(ws)).get(`meta ${c.event_id}`)?.outcome).toBe('sent');
    await rig.db.query(`UPDATE deliveries SET attempted_at = now() - interval '5000 hours' WHERE workspace_id = $1 AND destination_id = 'tiktok'`, [ws]);
    await rig.platform.deliveries.purge(rig.config.forwarder.ledgerRetentionMs);
    expect([...(await records(ws)).keys()]).toEqual([`meta ${c.event_id}`]);
  });

  it('a dead delivery has its dead letter on every path: the deliveries redrive sends it again, once', async () => {
    const { ws, dst } = await workspace();
    // A redrive rebuilds the conversion under the workspace's forwarding setup of today.
    await writeForwardingSetup(rig.db, ws, { ...SETUP, events: [{ name: 'purchase', platform_event: 'CompletePayment' }] });
    await failOnceEach();
    const [tried, waiting] = [purchase(ws), purchase(ws)];
    await deliver(ws, dst, [tried]);
    await rig.append([waiting]);
    await rig.intake.drain(); // queued, never attempted
    await rig.db.query(`UPDATE forward_outbox SET enqueued_at = now() - interval '2000 hours' WHERE workspace_id = $1`, [ws]);
    await rig.db.query(`UPDATE destination_outbox SET enqueued_at = now() - interval '2000 hours' WHERE destination_id = $1`, [dst]);
    await rig.platform.outbox.expireOld(rig.config.forwarder.parkMaxAgeMs);
    await rig.platform.destinations.expireOld(rig.config.forwarder.parkMaxAgeMs);
    const got = await records(ws);
    expect([got.get(`tiktok ${tried.event_id}`)?.outcome, got.get(`meta ${tried.event_id}`)?.outcome]).toEqual(['dead', 'dead']);
    const letters = await rig.db.query<{ origin: string; reason: string; error: string }>(
      'SELECT origin, reason, error FROM dead_letters WHERE workspace_id = $1 ORDER BY origin',
      [ws],
    );
    // The conversion never attempted was only dropped: nothing of it to redrive.
    expect(letters.rows.map((l) => [l.origin, l.reason])).toEqual([
      [`${dst}:${tried.event_id}`, 'expired'],
      [tried.event_id, 'expired'],
    ].sort((a, b) => a[0]!.localeCompare(b[0]!)));
    expect(letters.rows.find((l) => l.origin === tried.event_id)?.error).toMatch(/FORWARDER_PARK_MAX_HOURS; last answer: 50002/);

    const deadLetters = new DeadLetterRepo(rig.db);
    const redriver = new Redriver({ db: rig.db, repo: deadLetters, log: { reappend: async () => undefined } });
    const deps = { db: rig.db, deliveries: rig.platform.deliveries, deadLetters, redriver };
    expect(await redriveDeliveries(deps, ws, { eventIds: [tried.event_id, waiting.event_id] }, 'test')).toEqual({ redriven: 2, failed: [] });
    await sendOnce(ws, dst);
    const again = await records(ws);
    expect([again.get(`tiktok ${tried.event_id}`)?.outcome, again.get(`meta ${tried.event_id}`)?.outcome]).toEqual(['sent', 'sent']);
    expect((await rig.received()).filter((e) => e.event_id === tried.event_id)).toHaveLength(1);
    expect(await redriveDeliveries(deps, ws, { eventIds: [tried.event_id] }, 'test')).toEqual({ redriven: 0, failed: [] });
  });

  it('an erasure removes the person\'s delivery records on every path, and only theirs', async () => {
    const { ws, dst } = await workspace();
    const ann = purchase(ws);
    const bob = conversion(ws, { event_name: 'purchase', record: { user: { email: ['e'.repeat(64)], ttclid: 'T2' } } });
    await deliver(ws, dst, [ann, bob]);
    expect((await records(ws)).size).toBe(4);
    const removed = await rig.db.transaction((tx) =>
      deliveriesStep.run(tx, { erasureId: 'er_1', workspaceId: ws, requestedAt: Date.now(), nodes: [{ kind: 'email_sha256', value: H }] }),
    );
    expect(removed).toBe(2);
    expect([...(await records(ws)).keys()].sort()).toEqual([`meta ${bob.event_id}`, `tiktok ${bob.event_id}`]);
    // By click id too: what a record keeps of its conversion is enough for every identifier an erasure names.
    const byClick = await rig.db.transaction((tx) =>
      deliveriesStep.run(tx, { erasureId: 'er_2', workspaceId: ws, requestedAt: Date.now(), nodes: [{ kind: 'ttclid', value: 'T2' }] }),
    );
    expect(byClick).toBe(2);
    expect((await records(ws)).size).toBe(0);
  });
});
