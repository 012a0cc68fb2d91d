import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversion, eventually, startRig, type ForwarderRig } from '../../../test/helpers/forwarder-rig.js';
import { outboxEmptied } from '../../../test/helpers/outbox.js';
import { META_APP, metaServiceEnv, startMetaSandbox, type RunningMetaSandbox } from '../../../test/sandbox/meta/app.js';
import type { ConversionReady } from '../../domain/conversion.js';
import { DESTINATION_FILING, planFanOut, type FanOutDestination } from './fan-out.js';
import { connectMeta } from './meta.js';

const H = 'c'.repeat(64);
const PIXEL_A = '111111';
const PIXEL_B = '222222';

describe('planFanOut', () => {
  const dest = (over: Partial<FanOutDestination> = {}): FanOutDestination => ({
    id: 'dst_1',
    workspace_id: 'ws',
    status: 'connected',
    ever_connected: true,
    setup: { events: [{ name: 'purchase', platform_event: 'Purchase' }], pixel_id: PIXEL_A },
    ...over,
  });
  it.each([
    ['a selected live event', 'live', 'purchase', dest(), { action: 'queue', platformEvent: 'Purchase', testEventCode: '' }],
    ['a selected event waits while the destination needs re-authorisation', 'live', 'purchase', dest({ status: 'needs_reauth' }), { action: 'queue', platformEvent: 'Purchase', testEventCode: '' }],
    ['a selected event waits for a destination\'s first connection', 'live', 'purchase', dest({ status: 'disconnected', ever_connected: false }), { action: 'queue', platformEvent: 'Purchase', testEventCode: '' }],
    ['a test event with the destination\'s test code', 'test', 'purchase', dest({ setup: { events: [{ name: 'purchase', platform_event: 'Purchase' }], test_event_code: 'T9' } }), { action: 'queue', platformEvent: 'Purchase', testEventCode: 'T9' }],
  ] as const)('%s', (_n, mode, name, d, expected) => {
    expect(planFanOut({ key_mode: mode }, name, d)).toEqual(expected);
  });
  describe('bad input', () => {
    it.each([
      ['an event the destination did not select', 'live', 'sign_up', dest(), 'not_selected'],
      ['a destination an admin disconnected', 'live', 'purchase', dest({ status: 'disconnected' }), 'disconnected'],
      ['a test event without a test code', 'test', 'purchase', dest(), 'test_mode_without_test_event_code'],
      ['no event name to map', 'live', null, dest(), 'unknown_event_name'],
    ] as const)('%s', (_n, mode, name, d, reason) => {
      expect(planFanOut({ key_mode: mode }, name, d)).toEqual({ action: 'skip', reason });
    });
  });
});

describe('several destinations per workspace', () => {
  let rig: ForwarderRig;
  let meta: RunningMetaSandbox;
  beforeAll(async () => {
    meta = await startMetaSandbox({ pixels: [PIXEL_A, PIXEL_B] });
    rig = await startRig({
      env: {
        FORWARDER_BATCH_SIZE: '10',
        FORWARDER_LINGER_MS: '0',
        FORWARDER_RETRY_BASE_MS: '200',
        FORWARDER_RETRY_MAX_MS: '400',
        ...metaServiceEnv(meta),
      },
    });
  });
  afterAll(async () => {
    await rig?.close();
    await meta?.close();
  });
  const metaControl = (path: string, body?: unknown) =>
    fetch(`${meta.controlUrl}${path}`, {
      method: body === undefined ? 'DELETE' : 'POST',
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const metaReceived = async (pixel: string): Promise<Array<Record<string, any>>> =>
    (((await (await fetch(`${meta.controlUrl}/received`)).json()) as { events: Array<{ pixel_id: string; event: Record<string, any> }> }).events)
      .filter((e) => e.pixel_id === pixel)
      .map((e) => e.event);

  /** A workspace connected to TikTok (its first destination) with two Meta destinations, connected. */
  async function workspace(): Promise<{ ws: string; a: string; b: string }> {
    const ws = await rig.workspace();
    expect(await rig.connect(ws)).toMatchObject({ ok: true });
    const ids: string[] = [];
    for (const pixel of [PIXEL_A, PIXEL_B]) {
      const d = await rig.platform.destinations.create(ws, 'meta', `Meta ${pixel}`, {
        pixel_id: pixel,
        action_source: 'website',
        pii_mode: 'hashed',
        events: [{ name: 'purchase', platform_event: 'Purchase' }],
      });
      const res = await fetch(`${meta.authUrl}?${new URLSearchParams({ client_id: META_APP.id, redirect_uri: 'http://127.0.0.1:9/oauth/callback', state: 's' })}`, { redirect: 'manual' });
      const code = new URL(res.headers.get('location')!).searchParams.get('code')!;
      const grant = await connectMeta(rig.platform.metaClient, code, 'http://127.0.0.1:9/oauth/callback', pixel);
      if ('error' in grant) throw new Error(grant.error);
      await rig.platform.destinations.storeConnected(d.id, grant);
      ids.push(d.id);
    }
    return { ws, a: ids[0]!, b: ids[1]! };
  }
  const purchase = (ws: string, over: Partial<ConversionReady> = {}): ConversionReady =>
    conversion(ws, {
      event_name: 'purchase',
      record: { user: { email: [H], user_agent: 'Mozilla/5.0', ttclid: 'T1' }, properties: { value: 30, currency: 'EUR' }, page: { url: 'https://shop.example/c?fbclid=FB1&ttclid=T1' } },
      ...over,
    });

  it("files each conversion after one lookup by key in its destination's ledger, whatever the ledger's size and statistics", async () => {
    const { ws, a } = await workspace();
    // PGlite never analyses the ledger on its own: planned as an anti-join without statistics, it was hashed whole.
    await rig.db.query("INSERT INTO destination_sent (destination_id, event_id) SELECT $1, 'e' || i FROM generate_series(1, 20000) AS i", [a]);
    const ids = Array.from({ length: 200 }, (_, i) => `e${i * 50}`);
    const n = ids.length;
    const params = [Array(n).fill(a), Array(n).fill(ws), ids, Array(n).fill(PIXEL_A), Array(n).fill(''), Array(n).fill('{}'), Array(n).fill(Date.now()), Array(n).fill(null), null];
    const plan = (await rig.db.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${DESTINATION_FILING}`, params)).rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(plan).toMatch(/Index Only Scan using destination_sent_pkey/);
    expect(plan).not.toMatch(/Seq Scan on destination_sent|Hash/);
    const filed = await rig.db.transaction((tx) => tx.query<{ event_id: string }>(DESTINATION_FILING, params));
    expect(filed.rows.map((r) => r.event_id)).toEqual(['e0']);
    await rig.db.query('DELETE FROM destination_outbox WHERE destination_id = $1', [a]);
    await rig.db.query('DELETE FROM destination_sent WHERE destination_id = $1', [a]);
  });

  it('one purchase reaches TikTok and both Meta pixels, each in its own shape', async () => {
    const { ws, a, b } = await workspace();
    const c = purchase(ws);
    await rig.append([c]);
    await rig.intake.drain();
    await rig.platform.sender!.drain(ws);
    await rig.platform.destinationSender!.drain(a);
    await rig.platform.destinationSender!.drain(b);
    const tiktok = (await rig.received()).find((e) => e.event_id === c.event_id);
    expect(tiktok?.record).toMatchObject({ event: 'CompletePayment', user: { ttclid: 'T1', email: [H] } });
    for (const pixel of [PIXEL_A, PIXEL_B]) {
      const got = (await metaReceived(pixel)).filter((e) => e.event_id === c.event_id);
      expect(got).toHaveLength(1);
      expect(got[0]).toMatchObject({
        event_name: 'Purchase',
        action_source: 'website',
        event_source_url: 'https://shop.example/c?fbclid=FB1',
        user_data: { em: [H], client_user_agent: 'Mozilla/5.0', fbc: `fb.1.${c.record.event_time * 1000}.FB1` },
        custom_data: { value: 30, currency: 'EUR' },
      });
      expect(JSON.stringify(got[0])).not.toContain('T1');
    }
    const ledger = await rig.db.query<{ destination_id: string }>('SELECT destination_id FROM destination_sent WHERE event_id = $1 ORDER BY 1', [c.event_id]);
    expect(ledger.rows.map((r) => r.destination_id)).toEqual([a, b].sort());
  });

  it('one destination down never delays the others; it catches up without duplicates', async () => {
    const { ws, a, b } = await workspace();
    // Pixel A: every call hangs 4 s, then fails with a 503, many times over.
    await metaControl('/faults', { events: [{ pixel_id: PIXEL_A, delay_ms: 4000, http_status: 503, code: 2, times: 1000 }] });
    rig.platform.start();
    try {
      const cs = [purchase(ws), purchase(ws), purchase(ws)];
      const ids = cs.map((c) => c.event_id).sort();
      const t0 = Date.now();
      await rig.append(cs);
      await rig.intake.drain();
      await eventually('TikTok and pixel B have all three', async () => {
        const t = (await rig.received()).filter((e) => ids.includes(e.event_id)).length;
        const m = (await metaReceived(PIXEL_B)).filter((e) => ids.includes(e.event_id)).length;
        return t === 3 && m === 3;
      }, 8_000);
      const healthyMs = Date.now() - t0;
      expect(healthyMs).toBeLessThan(4_000); // before pixel A's first call even answered
      expect((await metaReceived(PIXEL_A)).filter((e) => ids.includes(e.event_id))).toHaveLength(0);
      const outbox = await rig.db.query<{ n: unknown }>('SELECT count(*) AS n FROM destination_outbox WHERE destination_id = $1', [a]);
      expect(Number(outbox.rows[0]!.n)).toBe(3);

      await metaControl('/faults');
      await eventually('pixel A catches up', async () => (await metaReceived(PIXEL_A)).filter((e) => ids.includes(e.event_id)).length === 3, 15_000);
      // The same conversions again (a replay, a redelivery): every destination's ledger already has them.
      await rig.append(cs);
      await rig.intake.drain();
      // Whatever the intake filed again has been answered once every outbox is empty (a row leaves its outbox in the
      // transaction that records the answer): only then is "nothing more arrived" a finding.
      await eventually('the destinations answered all they were given', async () =>
        (await rig.db.query<{ n: number }>('SELECT count(*)::int AS n FROM destination_outbox WHERE event_id = ANY($1::text[])', [ids])).rows[0]!.n === 0, 15_000);
      await outboxEmptied(rig.db, ws);
      for (const pixel of [PIXEL_A, PIXEL_B]) {
        const got = (await metaReceived(pixel)).filter((e) => ids.includes(e.event_id)).map((e) => e.event_id as string);
        expect(got.sort()).toEqual(ids);
      }
      expect((await rig.received()).filter((e) => ids.includes(e.event_id))).toHaveLength(3);
      void b;
    } finally {
      await rig.platform.close();
    }
  });

  it('housekeeping: conversions waiting past FORWARDER_PARK_MAX_HOURS are dropped, ledger entries past the retention forgotten', async () => {
    const { ws, a } = await workspace();
    const [old, fresh] = [purchase(ws), purchase(ws)];
    await rig.append([old, fresh]);
    await rig.intake.drain();
    await rig.db.query(`UPDATE destination_outbox SET enqueued_at = now() - interval '200 hours' WHERE destination_id = $1 AND event_id = $2`, [a, old.event_id]);
    await rig.db.query(`INSERT INTO destination_sent (destination_id, event_id, sent_at) VALUES ($1, 'ancient', now() - interval '5000 hours'), ($1, 'recent', now())`, [a]);
    await rig.platform.destinationSender!.housekeeping(Date.now() + 3_600_000);
    const waiting = await rig.db.query<{ event_id: string }>('SELECT event_id FROM destination_outbox WHERE destination_id = $1', [a]);
    expect(waiting.rows.map((r) => r.event_id)).toEqual([fresh.event_id]);
    const ledger = await rig.db.query<{ event_id: string }>("SELECT event_id FROM destination_sent WHERE destination_id = $1 AND event_id IN ('ancient', 'recent')", [a]);
    expect(ledger.rows.map((r) => r.event_id)).toEqual(['recent']);
  });
});
