import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../shared/db/db.js';
import { openDatabase } from '../shared/db/open.js';
import { CompactDedupeStore } from './compact-store.js';
import { Topics } from '../shared/topics.js';
import { sgtmEvent, serverEvent, webEvent } from '../../test/helpers/factories.js';
import { DAY, T0, fromA, fromB, webEnvelope } from '../../test/helpers/envelopes.js';
import { label, processAll } from '../../test/helpers/stage-harness.js';
import { createDedupeProcessor } from './processor.js';
import { dedupeVerdict } from './seen-marker.js';

let db: Db;
beforeAll(async () => {
  db = await openDatabase({ inMemory: true });
});
afterAll(async () => db?.close());

const WINDOW = 7 * DAY;
const dedupe = createDedupeProcessor({ windowMs: WINDOW });
let wsCounter = 0;
/** Every case runs in a workspace of its own, so cases never see each other's state. */
const freshWs = () => `ws_dedupe_${++wsCounter}`;

describe('dedupe: first seen wins per (workspace, key)', () => {
  it.each([
    {
      name: 'A: a later request with a seen key is dropped',
      batches: (ws: string) => [fromA([webEvent({ event_metadata: { idempotency_key: 'k1' } })], { workspaceId: ws }),
        fromA([webEvent({ event_metadata: { idempotency_key: 'k1' } })], { workspaceId: ws })],
      expected: ['ok', 'drop:duplicate'],
    },
    {
      name: 'A: the same key twice inside one request: the first event wins',
      batches: (ws: string) => [fromA([webEvent({ event_metadata: { idempotency_key: 'k1' } }), serverEvent({ event_metadata: { idempotency_key: 'k1' } })], { workspaceId: ws })],
      expected: ['ok', 'drop:duplicate'],
    },
    {
      name: 'A: different keys all pass',
      batches: (ws: string) => [fromA([webEvent(), webEvent(), serverEvent()], { workspaceId: ws })],
      expected: ['ok', 'ok', 'ok'],
    },
    {
      name: 'B: every event of the first request with a key passes; a later request with it is dropped whole, even with other events',
      batches: (ws: string) => [fromB([sgtmEvent(), sgtmEvent(), sgtmEvent()], 'req-1', { workspaceId: ws }),
        fromB([sgtmEvent({ event_name: 'sign_up' }), sgtmEvent()], 'req-1', { workspaceId: ws })],
      expected: ['ok', 'ok', 'ok', 'drop:duplicate_request', 'drop:duplicate_request'],
    },
    {
      name: 'B: without Idempotency-Key nothing is deduped here (enrich dedupes on the derived event_id)',
      batches: (ws: string) => {
        const body = sgtmEvent();
        return [fromB([body], undefined, { workspaceId: ws }), fromB([body], undefined, { workspaceId: ws })];
      },
      expected: ['ok', 'ok'],
    },
    {
      name: 'an A key and a B request key with the same text share the key: first seen wins',
      batches: (ws: string) => [fromA([webEvent({ event_metadata: { idempotency_key: 'shared' } })], { workspaceId: ws }),
        fromB([sgtmEvent()], 'shared', { workspaceId: ws })],
      expected: ['ok', 'drop:duplicate_request'],
    },
    {
      name: 'live and test keys are kept apart: a test event never makes a live one a duplicate',
      batches: (ws: string) => [fromA([webEvent({ event_metadata: { idempotency_key: 'k1' } })], { workspaceId: ws, keyMode: 'test' }),
        fromA([webEvent({ event_metadata: { idempotency_key: 'k1' } })], { workspaceId: ws, keyMode: 'live' }),
        fromA([webEvent({ event_metadata: { idempotency_key: 'k1' } })], { workspaceId: ws, keyMode: 'test' })],
      expected: ['ok', 'ok', 'drop:duplicate'],
    },
    {
      name: 'workspaces are kept apart',
      batches: (ws: string) => [fromA([webEvent({ event_metadata: { idempotency_key: 'k1' } })], { workspaceId: ws }),
        fromA([webEvent({ event_metadata: { idempotency_key: 'k1' } })], { workspaceId: `${ws}_other` })],
      expected: ['ok', 'ok'],
    },
    {
      name: 'inside the window a repeat is a duplicate',
      batches: (ws: string) => [fromA([webEvent({ event_metadata: { idempotency_key: 'k1' } })], { workspaceId: ws, receivedAt: T0 }),
        fromA([webEvent({ event_metadata: { idempotency_key: 'k1' } })], { workspaceId: ws, receivedAt: T0 + WINDOW - 1 })],
      expected: ['ok', 'drop:duplicate'],
    },
    {
      name: 'past the window the key is forgotten: the repeat passes (the documented trade-off) and starts a new window',
      batches: (ws: string) => [fromA([webEvent({ event_metadata: { idempotency_key: 'k1' } })], { workspaceId: ws, receivedAt: T0 }),
        fromA([webEvent({ event_metadata: { idempotency_key: 'k1' } })], { workspaceId: ws, receivedAt: T0 + WINDOW }),
        fromA([webEvent({ event_metadata: { idempotency_key: 'k1' } })], { workspaceId: ws, receivedAt: T0 + WINDOW + 1 })],
      expected: ['ok', 'ok', 'drop:duplicate'],
    },
    {
      name: 'an event received before the marker (gateway clocks out of step) is still a duplicate',
      batches: (ws: string) => [fromA([webEvent({ event_metadata: { idempotency_key: 'k1' } })], { workspaceId: ws, receivedAt: T0 }),
        fromA([webEvent({ event_metadata: { idempotency_key: 'k1' } })], { workspaceId: ws, receivedAt: T0 - 5_000 })],
      expected: ['ok', 'drop:duplicate'],
    },
  ])('$name', async ({ batches, expected }) => {
    const envelopes = batches(freshWs()).flat();
    expect((await processAll(db, dedupe, envelopes)).map(label)).toEqual(expected);
  });

  it('passes the envelope unchanged to events.deduped under the key of its identity graph (workspace and key mode)', async () => {
    const e = webEnvelope({}, { workspaceId: freshWs() });
    const [outcome] = await processAll(db, dedupe, [e]);
    expect(outcome).toEqual({ type: 'ok', outputs: [{ topic: Topics.eventsDeduped, key: `${e.workspace_id}:live`, value: e }] });
  });

  it('keeps its state in the runtime store, under the partition key, with the first request', async () => {
    const ws = freshWs();
    const [e] = fromB([sgtmEvent(), sgtmEvent()], 'req-9', { workspaceId: ws, keyMode: 'test' });
    await processAll(db, dedupe, [e]);
    const r = await db.query<{ value: unknown }>('SELECT value FROM state_store WHERE store = $1 AND key = $2', ['dedupe', `${ws}:req-9`]);
    expect(r.rows[0]?.value).toEqual({ v: 1, test: { first_seen: T0, request_id: e!.request_id } });
  });

  it('declares its store with the changelog topic and the window as retention', () => {
    expect(dedupe.store).toMatchObject({ name: 'dedupe', changelog: Topics.dedupeState, retentionMs: WINDOW });
    // On Kafka each partition's markers live in the compact store, with the same window.
    const store = dedupe.store!.partitionStore!();
    expect(store).toBeInstanceOf(CompactDedupeStore);
    expect((store as CompactDedupeStore).windowMs).toBe(WINDOW);
  });
});

describe('dedupe: dedupeVerdict (pure)', () => {
  const e = { key_mode: 'live' as const, request_id: 'r1', received_at: T0, dedupe: { key: 'k', scope: 'request' as const } };
  it.each([
    { name: 'no state', state: undefined, expected: 'first' },
    { name: 'same request', state: { v: 1 as const, live: { first_seen: T0, request_id: 'r1' } }, expected: 'same_request' },
    { name: 'other request', state: { v: 1 as const, live: { first_seen: T0, request_id: 'r0' } }, expected: 'duplicate' },
    { name: 'other mode only', state: { v: 1 as const, test: { first_seen: T0, request_id: 'r0' } }, expected: 'first' },
    { name: 'no marker, as decoded from Avro (null)', state: { v: 1 as const, live: null, test: { first_seen: T0, request_id: 'r0' } }, expected: 'first' },
    { name: 'expired marker', state: { v: 1 as const, live: { first_seen: T0 - WINDOW, request_id: 'r0' } }, expected: 'first' },
  ])('$name → $expected', ({ state, expected }) => {
    expect(dedupeVerdict(state, e, WINDOW).kind).toBe(expected);
  });

  it('keeps the other mode\'s marker when it writes its own', () => {
    const v = dedupeVerdict({ v: 1, test: { first_seen: 1, request_id: 't' } }, e, WINDOW);
    expect(v).toEqual({ kind: 'first', next: { v: 1, test: { first_seen: 1, request_id: 't' }, live: { first_seen: T0, request_id: 'r1' } } });
  });
});

describe('dedupe: bad input goes to the dead-letter topic', () => {
  const good = () => webEnvelope({}, { workspaceId: freshWs() });
  it.each([
    { name: 'not an object', value: 'hello' },
    { name: 'null', value: null },
    { name: 'an array', value: [1, 2] },
    { name: 'unknown envelope version', value: { ...good(), v: 2 } },
    { name: 'no workspace', value: { ...good(), workspace_id: '' } },
    { name: 'bad key mode', value: { ...good(), key_mode: 'prod' } },
    { name: 'received_at not a number', value: { ...good(), received_at: 'yesterday' } },
    { name: 'dedupe without a key', value: { ...good(), dedupe: { scope: 'event' } } },
    { name: 'dedupe with an unknown scope', value: { ...good(), dedupe: { key: 'k', scope: 'batch' } } },
    { name: 'consent value outside the enum', value: { ...good(), consent: { ...good().consent, ad_storage: 'YES' } } },
    { name: 'identifiers not an array', value: { ...good(), identifiers: {} } },
    { name: 'identifier of an unknown kind', value: { ...good(), identifiers: [{ kind: 'ssn', value: '1' }] } },
    { name: 'payload missing', value: { ...good(), payload: undefined } },
  ])('$name → dlq:invalid_envelope', async ({ value }) => {
    const [outcome] = await processAll(db, dedupe, [value]);
    expect(outcome!.type).toBe('dlq');
    expect(label(outcome!)).toBe('dlq:invalid_envelope');
  });
});
