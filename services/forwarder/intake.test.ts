import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Topics } from '../shared/topics.js';
import { INTAKE_GROUP } from './intake.js';
import { conversionProblem, planIntake, SENT_LOOKUP } from './outbox-filing.js';
import { forwardedConversions } from './metrics.js';
import type { ConversionDeadLetter } from './outbox-repo.js';
import { conversion, eventually, startRig, type ForwarderRig } from '../../test/helpers/forwarder-rig.js';
import { saltedHash, workspaceSalt } from '../enrich/identity/erasure-filter.js';
import { expandExplanation, type ConversionExplanation, type PlatformEventRecord } from '../domain/conversion.js';

describe('planIntake', () => {
  const c = conversion('ws_1');
  it.each([
    ['connected', 'connected', false, { action: 'queue', parked: false }],
    ['never connected', undefined, false, { action: 'queue', parked: true }],
    ['needs_reauth', 'needs_reauth', false, { action: 'queue', parked: true }],
    ['disconnected', 'disconnected', false, { action: 'drop', reason: 'disconnected' }],
    ['disconnected and already sent', 'disconnected', true, { action: 'drop', reason: 'disconnected' }],
    ['already sent', 'connected', true, { action: 'drop', reason: 'already_sent' }],
  ] as const)('%s', (_name, status, sent, expected) => {
    expect(planIntake(c, status, sent)).toEqual(expected);
  });

  describe('bad input', () => {
    const good = conversion('ws_1');
    it.each([
      ['null', null, 'not an object'],
      ['a string', 'purchase', 'not an object'],
      ['an array', [good], 'not an object'],
      ['no workspace', { ...good, workspace_id: undefined }, 'workspace_id'],
      ['an empty event_id', { ...good, event_id: '' }, 'event_id'],
      ['no pixel', { ...good, event_source_id: '' }, 'event_source_id'],
      ['a numeric test code', { ...good, test_event_code: 5 }, 'test_event_code'],
      ['received_at as a string', { ...good, received_at: '2030-01-01' }, 'received_at'],
      ['no record', { ...good, record: undefined }, 'record'],
      ['a record of another event', { ...good, record: { ...good.record, event_id: 'other' } }, 'record.event_id'],
    ])('%s is dead-lettered', (_name, value, problem) => {
      expect(conversionProblem(value)).toContain(problem);
      expect(planIntake(value, 'connected', false)).toMatchObject({ action: 'dlq' });
    });
    it('no event source and no pixel at all is a conversion for the other destinations only, not a mistake', () => {
      expect(conversionProblem({ ...good, event_source: '', event_source_id: '' })).toBeNull();
    });
  });
});

describe('ConversionIntake', () => {
  let rig: ForwarderRig;
  beforeAll(async () => {
    rig = await startRig();
  });
  afterAll(() => rig.close());

  const outbox = async (ws: string) =>
    (await rig.db.query<{ event_id: string }>('SELECT event_id FROM forward_outbox WHERE workspace_id = $1 ORDER BY id', [ws])).rows.map((r) => r.event_id);
  // NOTE: forwarder_conversions_total has no workspace label (bounded series): each test starts from a reset counter.
  beforeEach(() => forwardedConversions.reset());
  const count = async (_ws: string, outcome: string, code: string) =>
    (await forwardedConversions.get()).values.find((v) => v.labels.outcome === outcome && v.labels.code === code)?.value ?? 0;

  it("looks each conversion up in the sent ledger by its key, whatever the ledger's size and statistics", async () => {
    // PGlite never analyses the ledger on its own: a join planned without statistics hashed all of it every batch.
    await rig.db.query("INSERT INTO forward_sent (workspace_id, event_id) SELECT 'ws_ledger', 'e' || i FROM generate_series(1, 20000) AS i");
    const ids = Array.from({ length: 200 }, (_, i) => `e${i * 50}`);
    const plan = (await rig.db.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${SENT_LOOKUP}`, [ids.map(() => 'ws_ledger'), ids, null])).rows
      .map((r) => r['QUERY PLAN'])
      .join('\n');
    expect(plan).toMatch(/Index Only Scan using forward_sent_pkey/);
    expect(plan).not.toMatch(/Seq Scan on forward_sent|Hash/);
    const found = await rig.db.query<{ event_id: string }>(SENT_LOOKUP, [ids.map(() => 'ws_ledger'), ids, null]);
    expect(found.rows.map((r) => r.event_id).sort()).toEqual(ids.slice(1).sort());
    const since = await rig.db.query(SENT_LOOKUP, [ids.map(() => 'ws_ledger'), ids, Date.now() + 60_000]);
    expect(since.rows).toEqual([]);
    await rig.db.query("DELETE FROM forward_sent WHERE workspace_id = 'ws_ledger'");
  });

  it('files conversions per connection state and commits the offset with them', async () => {
    const never = await rig.workspace();
    const gone = await rig.workspace();
    await rig.db.query(`INSERT INTO connections (workspace_id, status) VALUES ($1, 'disconnected')`, [gone]);
    const a = conversion(never);
    const b = conversion(gone);
    await rig.append([a, b]);
    const consumed = await rig.intake.step();
    expect(consumed).toBeGreaterThanOrEqual(2);
    expect(await outbox(never)).toEqual([a.event_id]);
    expect(await outbox(gone)).toEqual([]);
    expect(await count(never, 'parked', 'not_connected')).toBe(1);
    expect(await count(gone, 'dropped', 'disconnected')).toBe(1);
    const off = await rig.db.query<{ offset: unknown }>('SELECT "offset" FROM consumer_offsets WHERE group_id = $1 AND topic = $2', [
      INTAKE_GROUP,
      Topics.conversionsReady,
    ]);
    const last = await rig.db.query<{ offset: unknown }>('SELECT max("offset") AS offset FROM log_records WHERE topic = $1', [Topics.conversionsReady]);
    expect(Number(off.rows[0]!.offset)).toBe(Number(last.rows[0]!.offset));
    expect(await rig.intake.step()).toBe(0);
  });

  it("stores each conversion's why-record with its filing, but never an erased person's", async () => {
    const ws = await rig.workspace();
    const why: ConversionExplanation = {
      consent: { analytics_storage: 'GRANTED', ad_storage: 'GRANTED', ad_user_data: 'GRANTED', ad_personalization: 'GRANTED' },
      pii_mode: 'hashed',
      attribution: 'event_click',
      limited_data_use: false,
      fields: [{ field: 'user.ttclid', sent: true, rule: 'event_click', value: 'E.C.P.abc' }],
    };
    const erasedEmail = 'a'.repeat(64);
    const kept = conversion(ws, { explanation: why });
    const gone = conversion(ws, { explanation: why, record: { user: { email: [erasedEmail] } } });
    const salt = await workspaceSalt(rig.db, ws);
    await rig.db.query('INSERT INTO erased_identifiers (workspace_id, id_hash, erased_at, erasure_id) VALUES ($1, $2, now() + interval \'1 minute\', $3)', [
      ws,
      saltedHash(salt, { cls: 'email', value: erasedEmail }),
      `era-${ws}`,
    ]);
    await rig.append([kept, gone]);
    await rig.intake.drain();
    const rows = await rig.db.query<{ event_id: string; explanation: ConversionExplanation; record: { event_id: string } }>(
      'SELECT event_id, explanation, record FROM conversion_explanations WHERE workspace_id = $1',
      [ws],
    );
    // Stored in its compact form (the values the record holds left out): whole again with its record.
    expect(rows.rows.map((r) => ({ ...r, explanation: expandExplanation(r.explanation, r.record as PlatformEventRecord) }))).toEqual([
      { event_id: kept.event_id, explanation: why, record: kept.record },
    ]);
    expect(await outbox(ws)).toEqual([kept.event_id]);
  });

  it('conversions waiting for a first connection are forwarded once it connects', async () => {
    const ws = await rig.workspace();
    const c = conversion(ws);
    await rig.append([c]);
    await rig.intake.drain();
    expect(await rig.platform.connections.sending.sendable('me', 100, 0, 1000, [])).not.toContain(ws);
    expect(await rig.connect(ws)).toMatchObject({ ok: true });
    await rig.platform.sender!.drain(ws);
    expect((await rig.received()).map((e) => e.event_id)).toContain(c.event_id);
  });

  it('a test-mode conversion never makes the live one with the same event_id look sent', async () => {
    const ws = await rig.workspace();
    expect(await rig.connect(ws)).toMatchObject({ ok: true });
    const sentFor = async () => (await rig.received()).filter((e) => e.event_id === 'order-77');
    const deliver = async (n: number) => {
      await rig.intake.drain();
      // The rig's background sender may hold the connection's send lease: wait for the delivery either way.
      return eventually(`${n} deliveries of order-77`, async () => {
        await rig.platform.sender!.drain(ws);
        const got = await sentFor();
        return got.length >= n && got;
      });
    };
    const test = conversion(ws, { event_id: 'order-77', key_mode: 'test', test_event_code: 'TEST1' });
    await rig.append([test]);
    await deliver(1);
    const live = conversion(ws, { event_id: 'order-77' });
    await rig.append([live]);
    const got = await deliver(2);
    expect(got).toHaveLength(2);
    expect(new Set(got.map((e) => e.test_event_code))).toEqual(new Set([null, 'TEST1']));
    // And each is still sent once: a replay of both changes nothing.
    await rig.append([test, live]);
    await rig.intake.drain();
    // drain() returns once everything ready was sent (the rig's loops are not running): nothing to wait for.
    await rig.platform.sender!.drain(ws);
    expect(await sentFor()).toHaveLength(2);
  });

  it('dead-letters an unreadable record on conversions.dlq and moves on', async () => {
    const ws = await rig.workspace();
    const good = conversion(ws);
    await rig.log.append(
      Topics.conversionsReady,
      [
        { key: `${ws}:bad`, value: { workspace_id: ws, event_id: 'bad', note: 'not a conversion' } },
        { key: `${ws}:${good.event_id}`, value: good },
      ],
      Date.now() + 5_000,
    );
    await rig.intake.drain();
    expect(await outbox(ws)).toEqual([good.event_id]);
    const dlq = (await rig.db.query<{ value: ConversionDeadLetter }>('SELECT value FROM log_records WHERE topic = $1', [Topics.conversionsDlq])).rows
      .map((r) => r.value)
      .filter((v) => v.workspace_id === ws);
    expect(dlq).toEqual([
      expect.objectContaining({ reason: 'invalid_conversion', event_id: 'bad', platform_code: null, record: { workspace_id: ws, event_id: 'bad', note: 'not a conversion' } }),
    ]);
    expect(dlq[0]!.platform_message).toContain('event_source');
  });

  it('a conversion for the other destinations only never waits for TikTok; with none to take it, it is dropped', async () => {
    const ws = await rig.workspace();
    const c = conversion(ws, { event_source: '', event_source_id: '', event_name: 'purchase' });
    await rig.log.append(
      Topics.conversionsReady,
      [
        { key: `${ws}:null`, value: null },
        { key: `${ws}:${c.event_id}`, value: c },
      ],
      Date.now() + 5_000,
    );
    await rig.intake.drain();
    expect(await outbox(ws)).toEqual([]);
    expect(await count(ws, 'dropped', 'not_selected')).toBe(1);
    const dlq = (await rig.db.query<{ value: ConversionDeadLetter }>('SELECT value FROM log_records WHERE topic = $1', [Topics.conversionsDlq])).rows
      .map((r) => r.value)
      .filter((v) => v.record === null);
    // The null value (a tombstone, say) is dead-lettered as unreadable, not taken for a conversion of no destination.
    expect(dlq).toEqual([expect.objectContaining({ reason: 'invalid_conversion', platform_message: expect.stringContaining('not an object') })]);
  });

  it('expires conversions that waited too long and purges the ledger after its retention', async () => {
    const ws = await rig.workspace();
    const c = conversion(ws);
    await rig.append([c]);
    await rig.intake.drain();
    await rig.db.query(`UPDATE forward_outbox SET enqueued_at = now() - interval '8 days' WHERE workspace_id = $1`, [ws]);
    expect((await rig.platform.outbox.expireOld(7 * 86_400_000)).get(ws)).toBe(1);
    expect(await outbox(ws)).toEqual([]);

    await rig.db.query(`INSERT INTO forward_sent (workspace_id, event_id, sent_at) VALUES ($1, 'old', now() - interval '49 hours'), ($1, 'new', now() - interval '47 hours')`, [ws]);
    await rig.platform.outbox.purgeLedger(48 * 3_600_000);
    const left = await rig.db.query<{ event_id: string }>('SELECT event_id FROM forward_sent WHERE workspace_id = $1', [ws]);
    expect(left.rows.map((r) => r.event_id)).toEqual(['new']);
  });
});
