import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expandExplanation, type ConversionReady } from '../domain/conversion.js';
import type { Db } from '../shared/db/db.js';
import { openDatabase } from '../shared/db/open.js';
import { derivedEventId } from '../domain/event-id.js';
import { registry } from '../shared/metrics.js';
import { Topics } from '../shared/topics.js';
import { serverEvent, sgtmEvent, sha256, webEvent } from '../../test/helpers/factories.js';
import { DAY, T0, fromA, fromB, webEnvelope, type CtxOver } from '../../test/helpers/envelopes.js';
import { label, outputValue, processAll } from '../../test/helpers/stage-harness.js';
import { seedWorkspace } from '../../test/helpers/workspaces.js';
import { PartitionStore } from '../stream/store.js';
import { CLAIM_PREFIX, claimEventIds, type EventIdClaim } from './event-id-claims.js';
import { createEnrichProcessor } from './processor.js';

let db: Db;
beforeAll(async () => {
  db = await openDatabase({ inMemory: true });
});
afterAll(async () => db?.close());

const enrich = createEnrichProcessor({ settingsTtlMs: 0 });
const run = (values: unknown[], processor = enrich) => processAll(db, processor, values);
const conversion = (o: Parameters<typeof outputValue>[0]) => outputValue<ConversionReady>(o);

const JANE = sha256('jane@example.com');
const JANE_PHONE = sha256('+4915112345678');
const USER_42 = sha256('user-42');
const HEX = /^[0-9a-f]{64}$/;

/** A server event of endpoint A (no page data of its own) for user-42. */
const serverEnvelope = (over: Parameters<typeof serverEvent>[0] = {}, ctx: CtxOver = {}) => fromA([serverEvent(over)], ctx)[0]!;
/** A web page view: updates the graph, never a conversion. */
const pageView = (over: Parameters<typeof webEvent>[0] = {}, ctx: CtxOver = {}) => webEnvelope({ event_name: 'page_view', ...over }, ctx);

describe('enrich: which events become conversions', () => {
  it.each([
    { name: 'a selected event', over: {}, ctx: {}, setup: {}, expected: 'ok' },
    { name: 'an event that is not selected', over: { event_name: 'page_view' }, ctx: {}, setup: {}, expected: 'drop:not_selected' },
    { name: 'names match exactly (case included)', over: { event_name: 'Purchase' }, ctx: {}, setup: {}, expected: 'drop:not_selected' },
    { name: 'an empty selection', over: {}, ctx: {}, setup: { events: [] }, expected: 'drop:not_selected' },
    { name: 'ad_storage DENIED', over: { event_metadata: { consent: { ad_storage: 'DENIED' } } }, ctx: {}, setup: {}, expected: 'drop:no_ad_storage_consent' },
    { name: 'ad_storage UNSPECIFIED', over: { event_metadata: { consent: { ad_storage: 'UNSPECIFIED' } } }, ctx: {}, setup: {}, expected: 'drop:no_ad_storage_consent' },
    { name: 'a test-mode key, setup with test_event_code', over: {}, ctx: { keyMode: 'test' as const }, setup: {}, expected: 'ok' },
    { name: 'a test-mode key, setup without test_event_code', over: {}, ctx: { keyMode: 'test' as const }, setup: { test_event_code: null }, expected: 'drop:test_mode_without_test_event_code' },
    { name: 'a live key, setup without test_event_code', over: {}, ctx: {}, setup: { test_event_code: null }, expected: 'ok' },
  ])('$name → $expected', async ({ over, ctx, setup, expected }) => {
    const ws = await seedWorkspace(db, { setup });
    expect((await run([webEnvelope(over as never, { ...ctx, workspaceId: ws })])).map(label)).toEqual([expected]);
  });

  it('a workspace without a forwarding setup forwards nothing', async () => {
    const ws = await seedWorkspace(db, { setup: null });
    expect((await run([webEnvelope({}, { workspaceId: ws })])).map(label)).toEqual(['drop:no_forwarding_setup']);
  });

  it('maps the event name, and routes by the setup: pixel, source, test_event_code only for test-mode keys', async () => {
    const ws = await seedWorkspace(db, { setup: { event_source: 'APP', event_source_id: 'PX-9' } });
    const [live, test, signUp] = await run([
      webEnvelope({}, { workspaceId: ws }),
      webEnvelope({}, { workspaceId: ws, keyMode: 'test' }),
      webEnvelope({ event_name: 'sign_up' }, { workspaceId: ws }),
    ]);
    expect(conversion(live!)).toMatchObject({ event_source: 'APP', event_source_id: 'PX-9', key_mode: 'live', test_event_code: null });
    expect(conversion(test!)).toMatchObject({ key_mode: 'test', test_event_code: 'TEST123' });
    expect(conversion(signUp!).record.event).toBe('CompleteRegistration');
    expect(live!.type === 'ok' && live!.outputs[0]).toMatchObject({ topic: Topics.conversionsReady, key: `${ws}:${conversion(live!).event_id}` });
  });
});

describe('enrich: the platform record', () => {
  it('a web purchase becomes exactly this record', async () => {
    const ws = await seedWorkspace(db, { timeZone: 'America/New_York' });
    const [o] = await run([webEnvelope({ event_metadata: { idempotency_key: 'order-1' } }, { workspaceId: ws, requestId: 'req-1' })]);
    // The "why this field" record rides with the conversion (the forwarder's filing stores it; privacy e2e reads it).
    const { explanation, ...built } = conversion(o!);
    expect(explanation).toMatchObject({ pii_mode: 'hashed', attribution: 'event_click', limited_data_use: false });
    expect(explanation!.fields.map((f) => `${f.field}:${f.rule}`)).toEqual([
      'user.email:graph_link',
      'user.phone:graph_link',
      'user.external_id:graph_link',
      'user.ttclid:event_click',
      'user.user_agent:event',
      'page.url:event',
    ]);
    // Carried compact (the values the record holds left out), whole again beside its record.
    expect(explanation).toMatchObject({ values_from_record: true });
    expect(explanation!.fields.every((f) => f.value === undefined)).toBe(true);
    expect(expandExplanation(explanation!, built.record).fields.find((f) => f.field === 'user.ttclid')).toMatchObject({ value: 'E.C.P.abc123' });
    expect(built).toEqual({
      v: 1,
      workspace_id: ws,
      key_mode: 'live',
      event_id: 'order-1',
      received_at: T0,
      request_id: 'req-1',
      event_source: 'WEB',
      event_source_id: 'PIXEL123',
      test_event_code: null,
      event_name: 'purchase',
      record: {
        event: 'CompletePayment',
        event_id: 'order-1',
        event_time: T0 / 1000,
        limited_data_use: false,
        page: { url: 'https://shop.example/checkout?ttclid=E.C.P.abc123' },
        user: {
          email: [JANE],
          phone: [JANE_PHONE],
          external_id: [USER_42],
          ttclid: 'E.C.P.abc123',
          user_agent: 'Mozilla/5.0 (X11; Linux x86_64)',
        },
        conversion_date_time: '2025-03-01 07:00:00-05:00',
        transaction_id: 'order-1',
        consent: { ad_user_data: 'GRANTED', ad_personalization: 'GRANTED' },
      },
    });
  });

  it('event_time is Unix seconds (floored); properties come from the payload', async () => {
    const ws = await seedWorkspace(db);
    const [o] = await run([serverEnvelope({ event_data: { value: 49.9, currency: 'EUR', transaction_id: 'T-77' } }, { workspaceId: ws, receivedAt: T0 + 999 })]);
    expect(conversion(o!).record).toMatchObject({ event_time: T0 / 1000, properties: { value: 49.9, currency: 'EUR', order_id: 'T-77' } });
  });

  it.each([
    { name: 'no connection', timeZone: undefined, expected: '2025-03-01 12:00:00+00:00' },
    { name: 'a connection without time zone', timeZone: null, expected: '2025-03-01 12:00:00+00:00' },
    { name: 'an unknown time zone', timeZone: 'Mars/Olympus', expected: '2025-03-01 12:00:00+00:00' },
    { name: 'Asia/Tokyo', timeZone: 'Asia/Tokyo', expected: '2025-03-01 21:00:00+09:00' },
  ])('conversion_date_time with $name → $expected', async ({ timeZone, expected }) => {
    const ws = await seedWorkspace(db, { timeZone });
    const [o] = await run([webEnvelope({}, { workspaceId: ws })]);
    expect(conversion(o!).record.conversion_date_time).toBe(expected);
  });
});

describe('enrich: event_id, transaction_id and conversion-level dedup', () => {
  it('the idempotency key is the event_id and the transaction_id', async () => {
    const ws = await seedWorkspace(db);
    const [o] = await run([webEnvelope({ event_metadata: { idempotency_key: 'K-1' } }, { workspaceId: ws })]);
    expect(conversion(o!)).toMatchObject({ event_id: 'K-1', record: { event_id: 'K-1', transaction_id: 'K-1' } });
  });

  it('endpoint B with Idempotency-Key: the key, suffixed by the index when the request holds several events', async () => {
    const ws = await seedWorkspace(db);
    const single = await run(fromB([sgtmEvent()], 'B-1', { workspaceId: ws }));
    const multi = await run(fromB([sgtmEvent(), sgtmEvent()], 'B-2', { workspaceId: ws }));
    expect([...single, ...multi].map((o) => conversion(o).event_id)).toEqual(['B-1', 'B-2:0', 'B-2:1']);
  });

  it('endpoint B without a key: the id derives from the payload (same payload, same id) and a repeat is dropped', async () => {
    const ws = await seedWorkspace(db);
    const body = sgtmEvent();
    const [first] = fromB([body], undefined, { workspaceId: ws });
    const [again] = fromB([body], undefined, { workspaceId: ws, receivedAt: T0 + 60_000 });
    const [other] = fromB([sgtmEvent()], undefined, { workspaceId: ws });
    const outcomes = await run([first, again, other]);
    expect(outcomes.map(label)).toEqual(['ok', 'drop:duplicate_event_id', 'ok']);
    const id = conversion(outcomes[0]!).event_id;
    expect(id).toMatch(HEX);
    expect(id).toBe(derivedEventId(first!));
    expect(conversion(outcomes[0]!).record.transaction_id).toBe(id);
    expect(conversion(outcomes[2]!).event_id).not.toBe(id);
  });

  it.each([
    { name: 'same key, same workspace and mode: dropped', second: (ws: string) => ({ workspaceId: ws }), expected: 'drop:duplicate_event_id' },
    { name: 'same key in test mode: kept apart', second: (ws: string) => ({ workspaceId: ws, keyMode: 'test' as const }), expected: 'ok' },
    { name: 'same key in another workspace: kept apart', second: () => ({ workspaceId: 'other' }), expected: 'drop:no_forwarding_setup' },
  ])('a conversion that got past dedupe (e.g. its window) with a known event_id: $name', async ({ second, expected }) => {
    const ws = await seedWorkspace(db);
    const [a] = await run([webEnvelope({ event_metadata: { idempotency_key: 'dup' } }, { workspaceId: ws })]);
    const [b] = await run([webEnvelope({ event_metadata: { idempotency_key: 'dup' } }, second(ws))]);
    expect([label(a!), label(b!)]).toEqual(['ok', expected]);
  });

  it('when dedupe\'s window covers the claim window, events dedupe keyed claim nothing; events without a key still do', async () => {
    const covered = createEnrichProcessor({ settingsTtlMs: 0, dedupeWindowMs: 7 * DAY });
    const ws = await seedWorkspace(db);
    const claims = async () =>
      (await db.query<{ key: string }>(`SELECT key FROM state_store WHERE key LIKE $1 ORDER BY key`, [`${CLAIM_PREFIX}${ws}%`])).rows.map((r) => r.key);
    // A and B with a key: no claim. A batch's own repeat of an id is still dropped (what one event at a time gives).
    const keyed = await run([webEnvelope({ event_metadata: { idempotency_key: 'k-1' } }, { workspaceId: ws }), ...fromB([sgtmEvent()], 'B-9', { workspaceId: ws }), webEnvelope({ event_metadata: { idempotency_key: 'k-1' } }, { workspaceId: ws })], covered);
    expect(keyed.map(label)).toEqual(['ok', 'ok', 'drop:duplicate_event_id']);
    expect(await claims()).toEqual([]);
    // B without a key claims its derived id, and a later repeat is dropped.
    const body = sgtmEvent();
    const [first] = await run(fromB([body], undefined, { workspaceId: ws }), covered);
    const [again] = await run(fromB([body], undefined, { workspaceId: ws, receivedAt: T0 + 60_000 }), covered);
    expect([label(first!), label(again!)]).toEqual(['ok', 'drop:duplicate_event_id']);
    expect(await claims()).toEqual([`${CLAIM_PREFIX}${ws}\u001flive\u001f${conversion(first!).event_id}`]);
    // A shorter dedupe window: a keyed event that got past it is held by its claim again.
    const shorter = createEnrichProcessor({ settingsTtlMs: 0, dedupeWindowMs: DAY });
    const [a] = await run([webEnvelope({ event_metadata: { idempotency_key: 'k-2' } }, { workspaceId: ws })], shorter);
    const [b] = await run([webEnvelope({ event_metadata: { idempotency_key: 'k-2' } }, { workspaceId: ws })], shorter);
    expect([label(a!), label(b!)]).toEqual(['ok', 'drop:duplicate_event_id']);
  });

  it('claims: the first conversion of an id wins, within a batch and across batches', async () => {
    const store = new PartitionStore<EventIdClaim>(undefined);
    const scope = { workspaceId: 'ws_claim', keyMode: 'live' as const };
    const claim = (eventId: string, at = T0) => ({ scope, eventId, at });
    const first = store.begin();
    expect(await claimEventIds(first, [claim('e1'), claim('e2'), claim('e1')])).toEqual([true, true, false]);
    store.apply(first, T0);
    const second = store.begin();
    expect(await claimEventIds(second, [claim('e2'), claim('e3'), claim('e1', T0 + DAY)])).toEqual([false, true, false]);
    // Another key mode or workspace is another id.
    expect(await claimEventIds(second, [{ ...claim('e1'), scope: { ...scope, keyMode: 'test' } }, { ...claim('e1'), scope: { ...scope, workspaceId: 'w2' } }])).toEqual([true, true]);
  });

  it('claims leave the stage\'s store after the window, and no sooner', async () => {
    const spec = createEnrichProcessor({ conversionIdWindowMs: 7 * DAY }).store!;
    const store = new PartitionStore<EventIdClaim>({ ms: spec.retentionMs, byPrefix: spec.retentionByPrefix });
    const tx = store.begin();
    await claimEventIds(tx, [{ scope: { workspaceId: 'ws_purge', keyMode: 'live' }, eventId: 'old', at: T0 }]);
    store.apply(tx, T0);
    expect(store.expired(T0 + 7 * DAY - 1, 10)).toEqual([]);
    expect(store.expired(T0 + 7 * DAY, 10)).toEqual([`${CLAIM_PREFIX}ws_purge\u001flive\u001fold`]);
  });
});

describe('enrich: personal data in the record', () => {
  it.each([
    { name: 'hashed mode, ad_user_data GRANTED: emails, E.164 phones, hashed user id', piiMode: 'hashed' as const, adUserData: 'GRANTED', expected: { email: [JANE], phone: [JANE_PHONE], external_id: [USER_42] } },
    { name: 'pii_mode none: nothing', piiMode: 'none' as const, adUserData: 'GRANTED', expected: {} },
    { name: 'ad_user_data DENIED: nothing', piiMode: 'hashed' as const, adUserData: 'DENIED', expected: {} },
    { name: 'ad_user_data UNSPECIFIED: nothing', piiMode: 'hashed' as const, adUserData: 'UNSPECIFIED', expected: {} },
  ])('$name', async ({ piiMode, adUserData, expected }) => {
    const ws = await seedWorkspace(db, { setup: { pii_mode: piiMode } });
    const [o] = await run([webEnvelope({ event_metadata: { consent: { ad_user_data: adUserData as never } } }, { workspaceId: ws })]);
    const user = conversion(o!).record.user ?? {};
    expect({ email: user.email, phone: user.phone, external_id: user.external_id }).toEqual({ email: undefined, phone: undefined, external_id: undefined, ...expected });
  });

  it('a server event with only a user id gets the emails and phones its cluster holds', async () => {
    const ws = await seedWorkspace(db);
    const other = sha256('jane.doe@work.example');
    await run([
      pageView({ event_metadata: { identifiers: { user: 'user-7', email: { sha256_email: JANE, sha256_canonical: other } } } }, { workspaceId: ws, receivedAt: T0 - DAY }),
    ]);
    const [o] = await run([serverEnvelope({ event_metadata: { identifiers: { user: 'user-7', email: undefined } } }, { workspaceId: ws })]);
    const user = conversion(o!).record.user!;
    expect(new Set(user.email)).toEqual(new Set([JANE, other]));
    expect(user.phone).toEqual([JANE_PHONE]);
    expect(user.external_id).toEqual([sha256('user-7')]);
  });

  it('identifiers that are not in the graph are not sent (an event that carries none, and has no known cluster)', async () => {
    const ws = await seedWorkspace(db);
    const [o] = await run([serverEnvelope({ event_metadata: { identifiers: { user: undefined, email: undefined } } }, { workspaceId: ws })]);
    expect(conversion(o!).record.user).toBeUndefined();
  });

  it('every personal value sent is a SHA-256 hex digest', async () => {
    const ws = await seedWorkspace(db);
    const [o] = await run([webEnvelope({ event_metadata: { identifiers: { user: 'Plain User Id', organization: 'Acme Inc' } } }, { workspaceId: ws })]);
    const user = conversion(o!).record.user!;
    for (const v of [...(user.email ?? []), ...(user.phone ?? []), ...(user.external_id ?? [])]) expect(v).toMatch(HEX);
    expect(user.external_id).toEqual([sha256('Plain User Id')]);
    expect(JSON.stringify(conversion(o!))).not.toContain('Acme Inc');
  });
});

describe('enrich: attribution', () => {
  /** A page view with a click id for user-42 `ago` before T0; then a server purchase of user-42 at T0. */
  async function clickThenPurchase(clicks: Array<{ ttclid: string; ago: number; consent?: object; keyMode?: 'live' | 'test' }>, setup = {}) {
    const ws = await seedWorkspace(db, { setup });
    for (const c of clicks) {
      await run([pageView({ event_data: { page_location: `https://shop.example/?ttclid=${c.ttclid}` }, event_metadata: { consent: c.consent ?? {} } },
        { workspaceId: ws, receivedAt: T0 - c.ago, keyMode: c.keyMode })]);
    }
    const [o] = await run([serverEnvelope({}, { workspaceId: ws })]);
    return conversion(o!).record;
  }

  it('the event\'s own ttclid wins', async () => {
    const ws = await seedWorkspace(db);
    await run([pageView({ event_data: { page_location: 'https://shop.example/?ttclid=OLDER' } }, { workspaceId: ws, receivedAt: T0 - 3600_000 })]);
    const [o] = await run([webEnvelope({ event_data: { page_location: 'https://shop.example/pay?ttclid=OWN' } }, { workspaceId: ws })]);
    expect(conversion(o!).record.user?.ttclid).toBe('OWN');
  });

  it.each([
    { name: 'a click 1 day before, window 7 days: used', clicks: [{ ttclid: 'C1', ago: DAY }], setup: {}, expected: 'C1' },
    { name: 'a click just inside the window', clicks: [{ ttclid: 'C1', ago: 7 * DAY - 60_000 }], setup: {}, expected: 'C1' },
    { name: 'a click exactly at the window\'s edge: expired', clicks: [{ ttclid: 'C1', ago: 7 * DAY }], setup: {}, expected: undefined },
    { name: 'a click 8 days before, window 7 days: expired', clicks: [{ ttclid: 'C1', ago: 8 * DAY }], setup: {}, expected: undefined },
    { name: 'a click 8 days before, window 30 days: used', clicks: [{ ttclid: 'C1', ago: 8 * DAY }], setup: { click_window_days: 30 }, expected: 'C1' },
    { name: 'the newest of two clicks', clicks: [{ ttclid: 'OLD', ago: 3 * DAY }, { ttclid: 'NEW', ago: DAY }], setup: {}, expected: 'NEW' },
    { name: 'an expired newer one never hides an older valid one', clicks: [{ ttclid: 'VALID', ago: DAY }, { ttclid: 'LATER', ago: -DAY }], setup: {}, expected: 'VALID' },
    { name: 'a click from an event without ad_storage was never kept', clicks: [{ ttclid: 'C1', ago: DAY, consent: { ad_storage: 'DENIED' } }], setup: {}, expected: undefined },
    { name: 'a test-mode click never attributes a live conversion', clicks: [{ ttclid: 'C1', ago: DAY, keyMode: 'test' as const }], setup: {}, expected: undefined },
  ])('$name', async ({ clicks, setup, expected }) => {
    const record = await clickThenPurchase(clicks, setup);
    expect(record.user?.ttclid).toBe(expected);
    // Without a click id it is an enhanced conversion: the graph's hashed identifiers carry the attribution.
    if (!expected) expect(record.user?.email).toEqual([JANE]);
  });

  it('a web event without ttclid takes its cluster\'s click too', async () => {
    const ws = await seedWorkspace(db);
    await run([pageView({}, { workspaceId: ws, receivedAt: T0 - DAY })]);
    const [o] = await run([webEnvelope({ event_data: { page_location: 'https://shop.example/thanks' } }, { workspaceId: ws })]);
    expect(conversion(o!).record.user?.ttclid).toBe('E.C.P.abc123');
  });

  it('no click id and no personal data allowed: neither is sent', async () => {
    const ws = await seedWorkspace(db, { setup: { pii_mode: 'none' } });
    const [o] = await run([serverEnvelope({}, { workspaceId: ws })]);
    expect(conversion(o!).record.user).toBeUndefined();
  });

  it('counts conversions by attribution', async () => {
    const before = await metric('enrich_conversions_total', { attribution: 'graph_click' });
    await clickThenPurchase([{ ttclid: 'M1', ago: DAY }]);
    expect(await metric('enrich_conversions_total', { attribution: 'graph_click' })).toBe(before + 1);
  });
});

describe('enrich: page.url and user.user_agent from the session data', () => {
  it('a web event: its own page location and user agent', async () => {
    const ws = await seedWorkspace(db);
    await run([pageView({ event_data: { page_location: 'https://shop.example/newer', user_agent: 'UA-graph' } }, { workspaceId: ws, receivedAt: T0 + 1000 })]);
    const [o] = await run([webEnvelope({ event_data: { page_location: 'https://shop.example/own', user_agent: 'UA-own' } }, { workspaceId: ws })]);
    expect(conversion(o!).record).toMatchObject({ page: { url: 'https://shop.example/own' }, user: { user_agent: 'UA-own' } });
  });

  it('a server event: the newest session data of its cluster, through the graph', async () => {
    const ws = await seedWorkspace(db);
    await run([
      pageView({ event_data: { page_location: 'https://shop.example/a', user_agent: 'UA-1', session_id: 's-a' } }, { workspaceId: ws, receivedAt: T0 - 3 * 3600_000 }),
      pageView({ event_data: { page_location: 'https://shop.example/b', user_agent: 'UA-2', session_id: 's-b' } }, { workspaceId: ws, receivedAt: T0 - 3600_000 }),
    ]);
    const [o] = await run([serverEnvelope({}, { workspaceId: ws })]);
    expect(conversion(o!).record).toMatchObject({ page: { url: 'https://shop.example/b' }, user: { user_agent: 'UA-2' } });
  });

  it('endpoint B: page fields in the payload are the event\'s own session data', async () => {
    const ws = await seedWorkspace(db);
    const [o] = await run(fromB([sgtmEvent()], 'b-page', { workspaceId: ws }));
    expect(conversion(o!).record).toMatchObject({ page: { url: 'https://shop.example/thanks' }, user: { user_agent: 'Mozilla/5.0' } });
  });

  it('nothing known: page.url is the empty string and user_agent is left out', async () => {
    const ws = await seedWorkspace(db);
    const [o] = await run([serverEnvelope({ event_metadata: { identifiers: { user: 'stranger' } } }, { workspaceId: ws })]);
    const record = conversion(o!).record;
    expect(record.page).toEqual({ url: '' });
    expect(record.user?.user_agent).toBeUndefined();
  });

  it('session data of an event without ad_storage is not kept', async () => {
    const ws = await seedWorkspace(db);
    await run([pageView({ event_data: { page_location: 'https://shop.example/secret' }, event_metadata: { consent: { ad_storage: 'DENIED' } } }, { workspaceId: ws, receivedAt: T0 - 60_000 })]);
    const [o] = await run([serverEnvelope({}, { workspaceId: ws })]);
    expect(conversion(o!).record.page.url).toBe('');
  });
});

async function metric(name: string, labels: Record<string, string> = {}): Promise<number> {
  const values = (await registry.getSingleMetric(name)!.get()).values;
  return values.filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l)).reduce((s, v) => s + v.value, 0);
}

describe('enrich: the identity graph', () => {
  const nodes = async (ws: string) =>
    (await db.query<{ kind: string; value: string; cluster_id: string }>(
      'SELECT kind, value, cluster_id FROM identity_nodes WHERE workspace_id = $1 ORDER BY kind, value', [ws])).rows;

  it('links the identifiers seen together in one event into one cluster, with edges', async () => {
    const ws = await seedWorkspace(db);
    await run([pageView({ event_metadata: { identifiers: { organization: 'acme' } } }, { workspaceId: ws })]);
    const all = await nodes(ws);
    expect(all.map((n) => n.kind).sort()).toEqual(
      ['client_id', 'email_sha256', 'organization', 'phone_e164_sha256', 'phone_numeric_sha256', 'ttclid', 'user_id'],
    );
    const persons = all.filter((n) => n.kind !== 'organization');
    expect(new Set(persons.map((n) => n.cluster_id)).size).toBe(1);
    expect(all.find((n) => n.kind === 'organization')!.cluster_id).not.toBe(persons[0]!.cluster_id);
    // From the user id to its lasting identifiers and the organisation; the click id keeps its cluster on its own node.
    const edges = await db.query<{ b_kind: string; a_kind: string }>('SELECT a_kind, b_kind FROM identity_edges WHERE workspace_id = $1', [ws]);
    expect(edges.rows.map((e) => [e.a_kind, e.b_kind].find((k) => k !== 'user_id')).sort()).toEqual(
      ['client_id', 'email_sha256', 'organization', 'phone_e164_sha256', 'phone_numeric_sha256'],
    );
  });

  it('two visitors whose sessions began in the same second stay two people', async () => {
    // GA4's ga_session_id is the second a session began: strangers share it all the time.
    const ws = await seedWorkspace(db);
    const visitor = (client: string, email: string) =>
      webEnvelope({
        event_name: 'page_view',
        event_data: { client_id: client, session_id: '1764000000', page_location: 'https://shop.example/' },
        event_metadata: { identifiers: { user: undefined, email: { sha256_email: sha256(email) }, phone: undefined } },
      }, { workspaceId: ws });
    await run([visitor('laptop-a', 'a@example.com')]);
    await run([visitor('laptop-b', 'b@example.com')]);
    const all = await nodes(ws);
    expect(all.map((n) => n.kind).sort()).toEqual(['client_id', 'client_id', 'email_sha256', 'email_sha256']);
    expect(new Set(all.map((n) => n.cluster_id)).size).toBe(2);
  });

  it("a returning person's visit adds the edges of its new identifiers only; a merge adds all of its event's", async () => {
    const ws = await seedWorkspace(db);
    const visit = (day: number, client: string, user?: string, email?: string) =>
      webEnvelope({
        event_name: 'page_view',
        event_data: { client_id: client, session_id: `s${day}`, page_location: 'https://shop.example/' },
        event_metadata: { identifiers: { user, email: email ? { sha256_email: sha256(email) } : undefined, phone: undefined } },
      }, { workspaceId: ws, receivedAt: T0 + day * DAY });
    const edges = async () =>
      (await db.query<{ a_kind: string; b_kind: string; last_seen_at: Date }>(
        'SELECT a_kind, b_kind, last_seen_at FROM identity_edges WHERE workspace_id = $1 ORDER BY 1, 2, 3', [ws])).rows.map(
        (e) => `${e.a_kind}-${e.b_kind}@${Math.round((e.last_seen_at.getTime() - T0) / DAY)}`,
      );
    await run([visit(0, 'laptop', 'u-1')]);
    expect(await edges()).toEqual(['client_id-user_id@0']);
    // Known user and client id, a new email: one new link. The user–client link is not written again.
    await run([visit(1, 'laptop', 'u-1', 'jo@example.com')]);
    expect(await edges()).toEqual(['client_id-user_id@0', 'email_sha256-user_id@1']);
    // A second device's cluster merged in by a login: every link of the merging event is evidence.
    await run([visit(2, 'phone')]);
    await run([visit(3, 'phone', 'u-1', 'jo@example.com')]);
    expect(await edges()).toEqual(['client_id-user_id@0', 'client_id-user_id@3', 'email_sha256-user_id@3']);
  });

  it('joins two clusters when a later event links them (a login on each device)', async () => {
    const ws = await seedWorkspace(db);
    const visit = (name: string, client: string, session: string, user?: string) =>
      webEnvelope({
        event_name: name,
        event_data: { client_id: client, session_id: session, page_location: 'https://shop.example/' },
        event_metadata: { identifiers: { user, email: undefined, phone: undefined } },
      }, { workspaceId: ws });
    const clusters = async () => new Set((await nodes(ws)).map((n) => n.cluster_id)).size;
    await run([visit('page_view', 'laptop', 's1'), visit('page_view', 'phone', 's2')]);
    expect(await clusters()).toBe(2);
    await run([visit('login', 'laptop', 's3', 'u-1')]);
    expect(await clusters()).toBe(2);
    await run([visit('login', 'phone', 's4', 'u-1')]);
    expect(await clusters()).toBe(1);
  });

  it('every event updates the graph, selected or not, even without a forwarding setup', async () => {
    const ws = await seedWorkspace(db, { setup: null });
    await run([pageView({}, { workspaceId: ws })]);
    expect((await nodes(ws)).length).toBeGreaterThan(0);
  });

  it('replaying an event changes nothing (idempotent upserts)', async () => {
    const ws = await seedWorkspace(db);
    const e = pageView({}, { workspaceId: ws });
    await run([e]);
    const snapshot = async () => [
      (await db.query('SELECT * FROM identity_nodes WHERE workspace_id = $1 ORDER BY kind, value', [ws])).rows,
      (await db.query('SELECT * FROM identity_edges WHERE workspace_id = $1 ORDER BY a_kind, a_value, b_kind, b_value', [ws])).rows,
    ];
    const once = await snapshot();
    await run([e]);
    expect(await snapshot()).toEqual(once);
  });

  it('test-mode traffic has a graph of its own', async () => {
    const ws = await seedWorkspace(db);
    await run([pageView({}, { workspaceId: ws, keyMode: 'test' })]);
    const modes = await db.query<{ key_mode: string }>('SELECT DISTINCT key_mode FROM identity_nodes WHERE workspace_id = $1', [ws]);
    expect(modes.rows).toEqual([{ key_mode: 'test' }]);
  });
});

describe('enrich: giant clusters', () => {
  const capped = createEnrichProcessor({ settingsTtlMs: 0, maxClusterIdentifiers: 6 });

  it('a shared identifier (a kiosk\'s client id) cannot fuse everybody: the cap holds, refusals are counted, nobody gets another person\'s data', async () => {
    const ws = await seedWorkspace(db);
    const refusalsBefore = await metric('identity_cluster_refusals_total');
    const people = Array.from({ length: 20 }, (_, i) => i);
    await run(
      people.map((i) =>
        pageView({
          event_data: { client_id: 'kiosk-1', session_id: `s-${i}`, page_location: 'https://shop.example/' },
          event_metadata: { identifiers: { user: `user-${i}`, email: { sha256_email: sha256(`p${i}@example.com`) }, phone: undefined } },
        }, { workspaceId: ws, receivedAt: T0 - 60_000 + i }),
      ),
      capped,
    );
    const sizes = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM identity_nodes WHERE workspace_id = $1 AND kind IN ('client_id', 'user_id', 'email_sha256') GROUP BY cluster_id ORDER BY n DESC`,
      [ws],
    );
    expect(sizes.rows[0]!.n).toBeLessThanOrEqual(6);
    expect(await metric('identity_cluster_refusals_total')).toBeGreaterThan(refusalsBefore);

    const [o] = await run([serverEnvelope({ event_metadata: { identifiers: { user: 'user-15', email: undefined } } }, { workspaceId: ws })], capped);
    expect(conversion(o!).record.user?.email).toEqual([sha256('p15@example.com')]);
    expect(conversion(o!).record.user?.external_id).toEqual([sha256('user-15')]);
  });
});

describe('enrich: bad input goes to the dead-letter topic', () => {
  const good = () => webEnvelope();
  it.each([
    { name: 'not an envelope', value: 42 },
    { name: 'unknown version', value: { ...good(), v: 3 } },
    { name: 'consent missing a purpose', value: { ...good(), consent: { ad_storage: 'GRANTED' } } },
    { name: 'identifier value not a string', value: { ...good(), identifiers: [{ kind: 'user_id', value: 7 }] } },
    { name: 'session not an object', value: { ...good(), session: 'abc' } },
    { name: 'session field not a string', value: { ...good(), session: { page_location: 5 } } },
    { name: 'received_at missing', value: { ...good(), received_at: undefined } },
    { name: 'source unknown', value: { ...good(), source: 'MOBILE' } },
  ])('$name → dlq:invalid_envelope', async ({ value }) => {
    const [o] = await run([value]);
    expect(label(o!)).toBe('dlq:invalid_envelope');
  });
});
