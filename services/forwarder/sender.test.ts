import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Topics } from '../shared/topics.js';
import { connectionFaults, forwardedConversions } from './metrics.js';
import type { ConversionDeadLetter } from './outbox-repo.js';
import { gaugesPeriodMs, splitRejected } from './sender.js';
import { conversion, eventually, sandboxControl, startRig, type ForwarderRig } from '../../test/helpers/forwarder-rig.js';

let rig: ForwarderRig;
beforeAll(async () => {
  rig = await startRig({ env: { FORWARDER_BATCH_SIZE: '3', FORWARDER_LINGER_MS: '0' } });
});
afterAll(() => rig.close());
afterEach(async () => {
  await fetch(`${rig.sandbox.controlUrl}/faults`, { method: 'DELETE' });
});

const intake = () => rig.intake;
const sender = () => rig.platform.sender!;

async function connected(): Promise<string> {
  const ws = await rig.workspace();
  expect(await rig.connect(ws)).toMatchObject({ ok: true });
  return ws;
}
async function receivedIds(ids: readonly string[]): Promise<string[]> {
  const set = new Set(ids);
  return (await rig.received()).map((e) => e.event_id).filter((id) => set.has(id));
}
async function trackCalls(): Promise<Array<{ code: number | null; http_status: number }>> {
  return (await sandboxControl(rig.sandbox, '/calls?endpoint=events')).calls;
}
async function outboxCount(ws: string): Promise<number> {
  return Number((await rig.db.query<{ n: unknown }>('SELECT count(*) AS n FROM forward_outbox WHERE workspace_id = $1', [ws])).rows[0]!.n);
}
async function ledger(ws: string): Promise<string[]> {
  return (await rig.db.query<{ event_id: string }>('SELECT event_id FROM forward_sent WHERE workspace_id = $1 ORDER BY event_id', [ws])).rows.map(
    (r) => r.event_id,
  );
}
// NOTE: forwarder_conversions_total has no workspace label (bounded series): each test starts from a reset counter.
beforeEach(() => forwardedConversions.reset());
async function metric(_ws: string, outcome: string, code?: string): Promise<number> {
  return (await forwardedConversions.get()).values
    .filter((v) => v.labels.outcome === outcome && (code === undefined || v.labels.code === code))
    .reduce((a, v) => a + v.value, 0);
}
/** Sends until nothing is left for the workspace or it stops (backoff is skipped by clearing it). */
async function sendAll(ws: string, rounds = 20): Promise<void> {
  for (let i = 0; i < rounds && (await outboxCount(ws)) > 0; i++) {
    await rig.db.query('UPDATE connections SET send_not_before = NULL WHERE workspace_id = $1', [ws]);
    await sender().drain(ws);
  }
}

describe('splitRejected', () => {
  it.each([
    ['the named record alone', [1, 2, 3, 4], 'data[2].event: unknown event name', [[3], [1, 2, 4]]],
    ['halves without a hint', [1, 2, 3, 4, 5], 'invalid parameters', [[1, 2, 3], [4, 5]]],
    ['halves when the hint is out of range', [1, 2], 'data[7].event_id: required', [[1], [2]]],
  ])('%s', (_name, batch, message, expected) => {
    expect(splitRejected(batch, message)).toEqual(expected);
  });
});

describe('gaugesPeriodMs: the outbox is counted again after 60 µs per row it held, between 5 s and 60 s', () => {
  it.each([
    ['an empty outbox', 0, 5_000],
    ['a batch or two', 1_000, 5_000],
    ['~80,000 rows still every 5 s', 83_333, 5_000],
    ['200,000 rows after 12 s', 200_000, 12_000],
    ['a million rows after a minute', 1_000_000, 60_000],
    ['never less often than a minute', 50_000_000, 60_000],
  ])('%s', (_name, rows, expected) => {
    expect(gaugesPeriodMs(rows)).toBeCloseTo(expected, 6);
  });
});

describe('ForwardSender', () => {
  it('forwards: one request per batch, the record as enrich made it, then the ledger', async () => {
    const ws = await connected();
    const cs = Array.from({ length: 5 }, () => conversion(ws));
    await rig.append(cs);
    await intake().drain();
    const callsBefore = (await trackCalls()).length;
    await sender().drain(ws);
    const ids = cs.map((c) => c.event_id);
    expect((await receivedIds(ids)).sort()).toEqual([...ids].sort());
    expect((await trackCalls()).length - callsBefore).toBe(2); // batches of 3 + 2
    const got = (await rig.received()).find((e) => e.event_id === cs[0]!.event_id)!;
    expect(got.record).toEqual(JSON.parse(JSON.stringify(cs[0]!.record)));
    expect(got.test_event_code).toBeNull();
    expect(await ledger(ws)).toEqual([...ids].sort());
    expect(await outboxCount(ws)).toBe(0);
    expect(await metric(ws, 'forwarded', '0')).toBe(5);
  });

  it('batches per pixel and test code, carrying the test code', async () => {
    const ws = await connected();
    const a = conversion(ws, { event_source_id: 'PIXEL_A' });
    const b = conversion(ws, { event_source_id: 'PIXEL_B' });
    const t = conversion(ws, { event_source_id: 'PIXEL_A', test_event_code: 'TEST123', key_mode: 'test' });
    await rig.append([a, b, t]);
    await intake().drain();
    await sendAll(ws);
    const events = (await sandboxControl(rig.sandbox, '/received')).events as Array<any>;
    const byId = new Map(events.map((e) => [e.record.event_id, e]));
    expect(byId.get(a.event_id)).toMatchObject({ event_source_id: 'PIXEL_A', test_event_code: null });
    expect(byId.get(b.event_id)).toMatchObject({ event_source_id: 'PIXEL_B', test_event_code: null });
    expect(byId.get(t.event_id)).toMatchObject({ event_source_id: 'PIXEL_A', test_event_code: 'TEST123' });
    expect(byId.get(a.event_id).request_id).not.toBe(byId.get(t.event_id).request_id);
  });

  it('a replay, a duplicate or a restart never sends a conversion twice', async () => {
    const ws = await connected();
    const c = conversion(ws);
    await rig.append([c, c]);
    await intake().drain();
    expect(await outboxCount(ws)).toBe(1);
    await sendAll(ws);
    await rig.append([c]);
    await intake().drain();
    expect(await outboxCount(ws)).toBe(0);
    await sendAll(ws);
    expect(await receivedIds([c.event_id])).toEqual([c.event_id]);
    expect(await metric(ws, 'dropped', 'already_queued')).toBe(1);
    expect(await metric(ws, 'dropped', 'already_sent')).toBe(1);
  });

  it('a 503 storm: backs off per connection, then delivers each conversion once', async () => {
    const ws = await connected();
    const cs = [conversion(ws), conversion(ws)];
    await sandboxControl(rig.sandbox, '/faults', { events: [{ http_status: 503, times: 4 }] });
    await rig.append(cs);
    await intake().drain();
    await sender().drain(ws);
    const r = (await rig.db.query<{ send_failures: number; send_not_before: unknown }>('SELECT send_failures, send_not_before FROM connections WHERE workspace_id = $1', [ws])).rows[0]!;
    expect(r.send_failures).toBe(1);
    expect(r.send_not_before).not.toBeNull();
    await sendAll(ws);
    expect((await receivedIds(cs.map((c) => c.event_id))).sort()).toEqual(cs.map((c) => c.event_id).sort());
    expect(await metric(ws, 'retried', '50002')).toBe(8);
    const after = (await rig.db.query<{ send_failures: number }>('SELECT send_failures FROM connections WHERE workspace_id = $1', [ws])).rows[0]!;
    expect(after.send_failures).toBe(0);
    const attempts = (await rig.db.query('SELECT * FROM forward_outbox WHERE workspace_id = $1', [ws])).rows;
    expect(attempts).toHaveLength(0);
  });

  it('a 40100 storm under HTTP 200 with Retry-After: waits at least that long', async () => {
    const ws = await connected();
    const c = conversion(ws);
    await sandboxControl(rig.sandbox, '/faults', { events: [{ code: 40100, retry_after: 2, times: 2 }] });
    await rig.append([c]);
    await intake().drain();
    await sender().drain(ws);
    const r = (await rig.db.query<{ wait: number }>(
      `SELECT extract(epoch FROM send_not_before - now()) * 1000 AS wait FROM connections WHERE workspace_id = $1`,
      [ws],
    )).rows[0]!;
    expect(Number(r.wait)).toBeGreaterThan(1_500);
    await sender().drain(ws); // backing off: no call
    expect(await receivedIds([c.event_id])).toEqual([]);
    await sendAll(ws);
    expect(await receivedIds([c.event_id])).toEqual([c.event_id]);
    expect(await metric(ws, 'retried', '40100')).toBe(2);
  });

  it('a permanent rejection: isolates the bad record, dead-letters it with the code and message, sends the rest', async () => {
    const ws = await connected();
    const good = [conversion(ws), conversion(ws)];
    const bad = conversion(ws, { record: { event: 'NotAPlatformEvent' } });
    await rig.append([good[0]!, bad, good[1]!]);
    await intake().drain();
    await sendAll(ws);
    expect((await receivedIds([...good, bad].map((c) => c.event_id))).sort()).toEqual(good.map((c) => c.event_id).sort());
    const dlq = (await rig.db.query<{ value: ConversionDeadLetter }>('SELECT value FROM log_records WHERE topic = $1', [Topics.conversionsDlq])).rows
      .map((r) => r.value)
      .filter((v) => v.workspace_id === ws);
    expect(dlq).toHaveLength(1);
    expect(dlq[0]).toMatchObject({
      reason: 'platform_rejected',
      event_id: bad.event_id,
      platform_code: 40002,
      event_source_id: 'PIXEL123',
      record: { event: 'NotAPlatformEvent' },
    });
    expect(dlq[0]!.platform_message).toContain('unknown event name');
    expect(await metric(ws, 'dead_lettered', '40002')).toBe(1);
    expect(await outboxCount(ws)).toBe(0);
    expect(await ledger(ws)).not.toContain(bad.event_id);
  });

  it('a rejection of the whole request (no permission) dead-letters the batch without splitting it', async () => {
    const ws = await connected();
    const cs = [conversion(ws), conversion(ws)];
    await sandboxControl(rig.sandbox, '/faults', { events: [{ code: 40001, message: 'No permission to operate this pixel.' }] });
    await rig.append(cs);
    await intake().drain();
    const before = (await trackCalls()).length;
    await sender().drain(ws);
    expect((await trackCalls()).length - before).toBe(1);
    expect(await metric(ws, 'dead_lettered', '40001')).toBe(2);
    expect(await outboxCount(ws)).toBe(0);
  });

  it('an expired token: refreshes and resends the batch', async () => {
    const ws = await connected();
    const c = conversion(ws);
    await sandboxControl(rig.sandbox, '/faults', { events: [{ code: 40102 }] });
    await rig.append([c]);
    await intake().drain();
    await sender().drain(ws);
    expect(await receivedIds([c.event_id])).toEqual([c.event_id]);
    expect((await rig.platform.connections.get(ws))?.status).toBe('connected');
    expect((await rig.platform.connections.get(ws))?.lastRefreshedAt).not.toBeNull();
  });

  it('a token error again right after a refresh: needs_reauth, conversions parked, resumed after reconnect', async () => {
    const ws = await connected();
    const c = conversion(ws);
    await sandboxControl(rig.sandbox, '/faults', { events: [{ code: 40105, times: 2 }] });
    await rig.append([c]);
    await intake().drain();
    await sender().drain(ws);
    expect((await rig.platform.connections.get(ws))?.status).toBe('needs_reauth');
    expect(await outboxCount(ws)).toBe(1);
    expect(await metric(ws, 'parked')).toBe(1);
    // Parked: neither sent nor retried in a loop.
    const calls = (await trackCalls()).length;
    await sender().tick();
    await sender().drain(ws);
    expect((await trackCalls()).length).toBe(calls);
    const later = conversion(ws);
    await rig.append([later]);
    await intake().drain();
    expect(await metric(ws, 'parked')).toBe(2);
    expect(await rig.connect(ws)).toMatchObject({ ok: true });
    await sendAll(ws);
    expect((await receivedIds([c.event_id, later.event_id])).sort()).toEqual([c.event_id, later.event_id].sort());
  });

  it('one slow account does not stall the others', async () => {
    const slow = await connected();
    const fast = await connected();
    await sandboxControl(rig.sandbox, '/faults', { events: [{ delay_ms: 1_800 }] }); // under the rig's 2 s request timeout
    const s = conversion(slow);
    const f = conversion(fast);
    await rig.append([s]);
    await intake().drain();
    let slowDone = false;
    const slowDrain = sender()
      .drain(slow)
      .finally(() => (slowDone = true));
    // The platform holds the slow call in its delay: it is on the wire, unanswered.
    await eventually('the slow call is out', async () => ((await sandboxControl(rig.sandbox, '/delayed')).delayed.events ?? 0) > 0);
    await rig.append([f]);
    await intake().drain();
    await sender().drain(fast);
    // The fast account was served while the slow call was still out (no wall-clock window to miss on a busy CI).
    expect(slowDone).toBe(false);
    expect(await receivedIds([s.event_id, f.event_id])).toEqual([f.event_id]);
    await slowDrain;
    expect(await receivedIds([s.event_id, f.event_id])).toEqual([f.event_id, s.event_id]);
  });

  it('waits for a full batch or the linger', async () => {
    const ws = await connected();
    await rig.append([conversion(ws), conversion(ws)]);
    await intake().drain();
    expect(await rig.platform.outbox.readyGroup(ws, 60_000, 3)).toBeNull();
    expect(await rig.platform.connections.sending.sendable('me', 10, 60_000, 3, [])).not.toContain(ws);
    expect(await rig.platform.outbox.readyGroup(ws, 0, 3)).toEqual({ eventSource: 'WEB', eventSourceId: 'PIXEL123', testEventCode: '' });
    await rig.append([conversion(ws)]);
    await intake().drain();
    expect(await rig.platform.outbox.readyGroup(ws, 60_000, 3)).not.toBeNull();
    expect(await rig.platform.connections.sending.sendable('me', 10, 60_000, 3, [])).toContain(ws);
    // A connection this sender drains already is not looked for again.
    expect(await rig.platform.connections.sending.sendable('me', 10, 60_000, 3, [ws])).not.toContain(ws);
    await sendAll(ws);
  });

  it('picks, of several batch groups, the one with the oldest first row among those ready', async () => {
    const ws = await connected();
    const put = async (pixel: string, testCode: string, n: number, age: string): Promise<void> => {
      for (let i = 0; i < n; i++) {
        await rig.db.query(
          `INSERT INTO forward_outbox (workspace_id, event_id, event_source, event_source_id, test_event_code, record, received_at, enqueued_at)
           VALUES ($1, $2, 'WEB', $3, $4, '{}', now(), now() - $5::interval)`,
          [ws, `${pixel}-${testCode}-${i}`, pixel, testCode, age],
        );
      }
    };
    await put('P1', '', 2, '0 s'); // neither full nor lingered
    await put('P2', '', 3, '0 s'); // full
    await put('P3', 'TEST1', 1, '1 hour'); // lingered, but its first row came last
    expect(await rig.platform.outbox.readyGroup(ws, 60_000, 3)).toEqual({ eventSource: 'WEB', eventSourceId: 'P2', testEventCode: '' });
    expect(await rig.platform.connections.sending.sendable('me', 10, 60_000, 3, [])).toContain(ws);
    await rig.db.query("DELETE FROM forward_outbox WHERE workspace_id = $1 AND event_source_id = 'P2'", [ws]);
    expect(await rig.platform.outbox.readyGroup(ws, 60_000, 3)).toEqual({ eventSource: 'WEB', eventSourceId: 'P3', testEventCode: 'TEST1' });
    await rig.db.query("DELETE FROM forward_outbox WHERE workspace_id = $1 AND event_source_id = 'P3'", [ws]);
    expect(await rig.platform.outbox.readyGroup(ws, 60_000, 3)).toBeNull();
    expect(await rig.platform.connections.sending.sendable('me', 10, 60_000, 3, [])).not.toContain(ws);
    expect(await rig.platform.outbox.readyGroup(ws, 0, 3)).toEqual({ eventSource: 'WEB', eventSourceId: 'P1', testEventCode: '' });
    await rig.db.query('DELETE FROM forward_outbox WHERE workspace_id = $1', [ws]);
  });

  it('tokens that do not open (wrong CREDENTIALS_KEY): parked with the reason and a metric, no error loop, restored when they open', async () => {
    const ws = await connected();
    const cs = Array.from({ length: 2 }, () => conversion(ws));
    await rig.append(cs);
    await intake().drain();
    const sealed = (await rig.db.query<{ access_token_enc: string }>('SELECT access_token_enc FROM connections WHERE workspace_id = $1', [ws])).rows[0]!
      .access_token_enc;
    // What a wrong key looks like to the cipher: a ciphertext that fails authentication.
    const [keyId, body] = sealed.split(':');
    const tampered = `${keyId}:${Buffer.from(Buffer.from(body!, 'base64').map((b, i) => (i === 20 ? b ^ 1 : b))).toString('base64')}`;
    await rig.db.query('UPDATE connections SET access_token_enc = $2 WHERE workspace_id = $1', [ws, tampered]);
    const faults = async () => (await connectionFaults.get()).values.reduce((a, v) => a + v.value, 0);
    const before = await faults();

    await expect(sender().drain(ws)).resolves.toBeUndefined();
    const view = await rig.platform.connections.get(ws);
    expect(view).toMatchObject({ status: 'needs_reauth', statusCode: 'credentials_unreadable' });
    expect(view!.statusReason).toContain('CREDENTIALS_KEY');
    expect(await faults()).toBe(before + 1);
    expect(await outboxCount(ws)).toBe(2); // parked, not dropped
    expect(await rig.platform.connections.sending.sendable('someone', 100, 0, 1, [])).not.toContain(ws);

    // The right ciphertext back (the right key after a restart): restored, and what waited is sent.
    await rig.db.query('UPDATE connections SET access_token_enc = $2 WHERE workspace_id = $1', [ws, sealed]);
    expect(await rig.platform.connections.credentials.restoreReadable(100)).toContain(ws);
    expect(await rig.platform.connections.get(ws)).toMatchObject({ status: 'connected', statusCode: null, statusReason: null });
    await sendAll(ws);
    expect(await outboxCount(ws)).toBe(0);
    expect((await receivedIds(cs.map((c) => c.event_id))).length).toBe(2);
  });

  it('the loops forward on their own', async () => {
    const ws = await connected();
    const cs = [conversion(ws), conversion(ws)];
    intake().start();
    sender().start();
    try {
      await rig.append(cs);
      await eventually('delivered', async () => (await receivedIds(cs.map((c) => c.event_id))).length === 2, 5_000);
    } finally {
      await intake().stop();
      await sender().stop();
    }
  });

});
