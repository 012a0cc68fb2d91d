/**
 * Privacy end to end over real HTTP (docs/privacy.md): the whole service on the embedded default (in this process,
 * listening on loopback) and the platform sandbox. Events in through endpoint A; conversions out to the sandbox;
 * "why this field" for a forwarded conversion; an erasure and what it removed from every store; the forwarded record
 * of the same person before and after; a replay of the person's old event after the erasure; and every privacy
 * route's bad input.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErasureFilter } from '../../services/enrich/identity/erasure-filter.js';
import { nodeIdOf } from '../../services/enrich/identity/graph-repo.js';
import { startService, type RunningService } from '../../services/compose/service.js';
import type { DeadLetter } from '../../services/domain/dead-letter.js';
import type { EventEnvelope } from '../../services/domain/envelope.js';
import { loadConfig } from '../../services/shared/config.js';
import { silentLogger } from '../../services/shared/logger.js';
import { Topics } from '../../services/shared/topics.js';
import { adminClient, type AdminClient } from '../helpers/admin-client.js';
import { sha256, serverEvent, webEvent } from '../helpers/factories.js';
import { conversion, eventually, receivedBySandbox } from '../helpers/forwarder-rig.js';
import { sandboxServiceEnv } from '../helpers/sre-flow.js';
import { SETUP } from '../helpers/workspaces.js';
import { connectLikeABrowser } from '../sandbox/connect.js';
import { freePort } from '../sandbox/ports.js';
import { startSandbox, type RunningSandbox } from '../sandbox/server.js';

const ADMIN = 'privacy-e2e-admin-token';
let sandbox: RunningSandbox;
let service: RunningService;
let url: string;
let admin: AdminClient;

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0 });
  const port = await freePort();
  url = `http://127.0.0.1:${port}`; // = PUBLIC_BASE_URL
  const config = loadConfig({
    ...sandboxServiceEnv(sandbox, port),
    HOST: '127.0.0.1',
    DATA_DIR: mkdtempSync(join(tmpdir(), 'privacy-e2e-')),
    ADMIN_TOKEN: ADMIN,
    ERASURE_POLL_INTERVAL_MS: '50',
    LOG_LEVEL: 'silent',
    GATEWAY_MAX_EVENT_LOOP_DELAY_MS: '0',
  });
  service = await startService(config, silentLogger, { inMemoryDb: true });
  await service.app.listen({ port, host: '127.0.0.1' });
  admin = adminClient(url, ADMIN);
});
afterAll(async () => {
  await service?.close();
  await sandbox?.close();
});

/** A workspace with a live key and the forwarding setup; connected to the sandbox unless told otherwise. */
async function workspace(connect = true): Promise<{ ws: string; key: string }> {
  const ws = (await admin.createWorkspace('privacy')).id;
  const key = (await admin.createKey(ws, 'live')).key;
  expect((await admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, SETUP)).status).toBe(200);
  if (connect) {
    const started = await admin.call('POST', `/admin/v1/workspaces/${ws}/connection`);
    expect((await connectLikeABrowser(started.body.authorize_url)).status).toBe(200);
  }
  return { ws, key };
}

async function send(key: string, events: unknown[]): Promise<void> {
  const r = await fetch(`${url}/v1/events`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(events),
  });
  expect(r.status, await r.clone().text()).toBe(202);
}

/** The record the sandbox received for this event id. */
const forwarded = (eventId: string) =>
  eventually(`${eventId} forwarded`, async () => (await receivedBySandbox(sandbox)).find((e) => e.event_id === eventId)?.record);

/** Waits until every stage of the embedded pipeline has consumed everything. */
const drained = () =>
  eventually('pipeline drained', async () => {
    const r = await admin.call('GET', '/admin/v1/pipeline');
    return r.body.consumers.every((c: { lag: number }) => c.lag === 0);
  });

async function erase(ws: string, identifiers: Record<string, string>): Promise<Record<string, any>> {
  const r = await admin.call('POST', `/admin/v1/workspaces/${ws}/erasures`, { identifiers });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  expect(r.body).toMatchObject({ id: expect.stringMatching(/^era_/), status: expect.stringMatching(/queued|running|done/) });
  return eventually('erasure done', async () => {
    const job = await admin.call('GET', `/admin/v1/workspaces/${ws}/erasures/${r.body.id}`);
    expect(job.status).toBe(200);
    expect(job.body.status, job.body.error).not.toBe('failed');
    return job.body.status === 'done' ? job.body : undefined;
  });
}

const NO_IDS = { user: undefined, email: undefined, phone: undefined };
const JANE = sha256('jane.erased@example.com');
const JANE_PHONE = sha256('+4915100000001');

describe('why this field, and erasure: the same person forwarded before and after', () => {
  let ws: string;
  let key: string;
  let oldEnvelope: EventEnvelope;

  it('explains each user field of a forwarded conversion', async () => {
    ({ ws, key } = await workspace());
    await send(key, [
      webEvent({
        event_data: { client_id: 'cid-jane', session_id: 'sid-jane', page_location: 'https://shop.example/?ttclid=E.C.P.jane' },
        event_metadata: { idempotency_key: 'order-j1', identifiers: { user: 'u-jane', email: { sha256_email: JANE }, phone: { sha256_e164: JANE_PHONE } } },
      }),
    ]);
    const record = await forwarded('order-j1');
    expect(record.user).toMatchObject({ email: [JANE], phone: [JANE_PHONE], external_id: [sha256('u-jane')], ttclid: 'E.C.P.jane' });

    const why = await eventually('the conversion shows as sent', async () => {
      const r = await admin.call('GET', `/admin/v1/workspaces/${ws}/conversions/order-j1`);
      expect(r.status).toBe(200);
      return r.body.delivery.status === 'sent' ? r.body : undefined;
    });
    expect(why.record).toEqual(record);
    expect(why).toMatchObject({
      event_id: 'order-j1',
      key_mode: 'live',
      consent: { ad_storage: 'GRANTED', ad_user_data: 'GRANTED', ad_personalization: 'GRANTED', analytics_storage: 'GRANTED' },
      pii_mode: 'hashed',
      attribution: 'event_click',
      limited_data_use: false,
    });
    const field = (name: string) => why.fields.filter((f: { field: string }) => f.field === name);
    expect(field('user.email')).toEqual([
      { field: 'user.email', sent: true, rule: 'graph_link', value: JANE, graph_node: { kind: 'email_sha256', first_seen_at: expect.any(String), last_seen_at: expect.any(String) } },
    ]);
    expect(field('user.external_id')[0]).toMatchObject({ sent: true, rule: 'graph_link', value: sha256('u-jane'), graph_node: { kind: 'user_id' } });
    expect(field('user.ttclid')[0]).toMatchObject({ sent: true, rule: 'event_click', value: 'E.C.P.jane' });
    expect(field('user.user_agent')[0]).toMatchObject({ sent: true, rule: 'event' });
    expect(Date.parse(why.expires_at) - Date.parse(why.built_at)).toBe(30 * 24 * 3600_000);
  });

  it('before the erasure: a server conversion with only the user id takes the email, phone and click id from the graph', async () => {
    await send(key, [serverEvent({ event_metadata: { idempotency_key: 'order-j2', identifiers: { ...NO_IDS, user: 'u-jane' } } })]);
    const record = await forwarded('order-j2');
    expect(record.user).toMatchObject({ email: [JANE], phone: [JANE_PHONE], external_id: [sha256('u-jane')], ttclid: 'E.C.P.jane' });
    const why = (await admin.call('GET', `/admin/v1/workspaces/${ws}/conversions/order-j2`)).body;
    expect(why.attribution).toBe('graph_click');
    expect(why.fields.find((f: { field: string }) => f.field === 'user.ttclid')).toMatchObject({ rule: 'graph_click' });
  });

  it('erases the person from every store and keeps an audit record without their identifiers in clear', async () => {
    await drained();
    const raw = await service.db.query<{ value: EventEnvelope }>(
      `SELECT value FROM log_records WHERE topic = $1 AND value->>'workspace_id' = $2 AND value->>'idempotency_key' = 'order-j1'`,
      [Topics.eventsRaw, ws],
    );
    oldEnvelope = raw.rows[0]!.value;
    // A dead letter of the person's (an event a stage could not process).
    const letter: DeadLetter = {
      stage: 'enrich', reason: 'test', error: 'boom', source_topic: Topics.eventsDeduped, source_partition: 0, source_offset: '1',
      key: `${ws}:x`, value: { ...oldEnvelope, idempotency_key: 'order-j9' }, failed_at: Date.now(),
    };
    await service.log!.append(Topics.eventsDlq, [{ key: letter.key, value: letter }], Date.now() + 10_000);
    // order-j2 changed nothing of the user id but when it was last seen: the graph sink had a sighting of it (its node id).
    const userNode = nodeIdOf({ workspaceId: ws, keyMode: 'live' }, { kind: 'user_id', value: 'u-jane' });
    const sightings = () => service.db.query(`SELECT 1 FROM log_records WHERE topic = $1 AND value::text LIKE $2`, [Topics.identityChanges, `%${userNode}%`]);
    expect((await sightings()).rows.length).toBeGreaterThan(0);

    const job = await erase(ws, { user: 'u-jane' });
    expect(job.removed).toMatchObject({
      identity_graph: 6, // user id, email, phone (E.164 and numeric), client id, click id: the whole cluster (a session id is no node)
      identity_links: expect.any(Number),
      outbox: 0,
      dead_letters: 1,
      event_log: expect.any(Number),
      why_records: 2,
      redaction_list: expect.any(Number),
    });
        expect(job.removed.identity_links).toBeGreaterThan(0);
    expect(job.removed.event_log).toBeGreaterThanOrEqual(4); // events.raw and events.deduped of both events, their conversions.ready
    expect(job.subject).toEqual({ user: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(job.subject.user).not.toBe(sha256('u-jane'));

    const left = await service.db.query(`SELECT kind FROM identity_nodes WHERE workspace_id = $1`, [ws]);
    expect(left.rows).toEqual([]);
    const logged = await service.db.query(`SELECT 1 FROM log_records WHERE value::text LIKE '%u-jane%' OR value::text LIKE $1`, [`%${JANE}%`]);
    expect(logged.rows).toEqual([]);
    expect((await sightings()).rows).toEqual([]);
    const erasureRow = await service.db.query(`SELECT pending, subject::text AS subject FROM erasures WHERE id = $1`, [job.id]);
    expect(erasureRow.rows[0]).toMatchObject({ pending: null });
    const audit = await service.db.query<{ action: string; detail: unknown }>(`SELECT action, detail FROM audit_log WHERE workspace_id = $1 AND action LIKE 'erasure.%' ORDER BY id`, [ws]);
    expect(audit.rows.map((a) => a.action)).toEqual(['erasure.requested', 'erasure.done']);
    expect(JSON.stringify(audit.rows)).not.toMatch(/u-jane|jane|cid-jane/);
    expect((await admin.call('GET', `/admin/v1/workspaces/${ws}/conversions/order-j1`)).status).toBe(404);
  });

  it('after the erasure: the same user id alone is new data, nothing of the erased cluster comes back', async () => {
    await send(key, [serverEvent({ event_metadata: { idempotency_key: 'order-j3', identifiers: { ...NO_IDS, user: 'u-jane' } } })]);
    const record = await forwarded('order-j3');
    expect(record.user).toEqual({ external_id: [sha256('u-jane')] });
    // The old device is not linked any more either.
    await send(key, [webEvent({ event_data: { client_id: 'cid-jane', session_id: 'sid-new', page_location: 'https://shop.example/' }, event_metadata: { idempotency_key: 'order-j4', identifiers: NO_IDS } })]);
    expect((await forwarded('order-j4')).user).toEqual({ user_agent: expect.any(String) });
  });

  it('a replay of the erased person\'s old event does not re-link it; the redaction list says so', async () => {
    const filter = await ErasureFilter.load(service.db, ws);
    expect(filter.size).toBe(7); // the 6 identifiers of the cluster and the SHA-256 of the user id, as records carry it
    expect(filter.matches(oldEnvelope)).toBe(true);
    expect(filter.matches({ ...oldEnvelope, received_at: Date.now() + 1000 })).toBe(false);
    // As the replay job does: the old envelope through enrich again.
    await service.log!.append(Topics.eventsDeduped, [{ key: `${ws}:replayed`, value: { ...oldEnvelope, idempotency_key: 'order-j1-replayed' } }], Date.now() + 10_000);
    await drained();
    const relinked = await service.db.query(`SELECT kind FROM identity_nodes WHERE workspace_id = $1 AND value = ANY($2::text[])`, [ws, [JANE, JANE_PHONE, 'E.C.P.jane']]);
    expect(relinked.rows).toEqual([]);
    expect((await receivedBySandbox(sandbox)).some((e) => e.event_id === 'order-j1-replayed')).toBe(false);
  });

  it('a replay job over the whole range after the erasure sends nothing of the person and re-links nothing', async () => {
    const sentBefore = (await receivedBySandbox(sandbox)).length;
    const started = await admin.call('POST', `/admin/v1/workspaces/${ws}/replays`, {
      from: new Date(Date.now() - 3600_000).toISOString(),
      to: new Date(Date.now() + 60_000).toISOString(),
      resend: true,
    });
    expect(started.status).toBe(202);
    const job = await eventually('the replay finished', async () => {
      const r = await admin.call('GET', `/admin/v1/workspaces/${ws}/replays/${started.body.id}`);
      return r.body.status === 'done' ? r.body : undefined;
    });
    // resend: everything the replay found went again, so whatever of the person it had found would be at the platform.
    await eventually('the resent conversions', async () => (await receivedBySandbox(sandbox)).length >= sentBefore + job.conversions_sent);
    const resent = (await receivedBySandbox(sandbox)).slice(sentBefore);
    // (The user id alone came back later as new data, order-j3: that one may go again.)
    const text = JSON.stringify(resent);
    for (const gone of [JANE, JANE_PHONE, 'E.C.P.jane']) expect(text).not.toContain(gone);
    expect(resent.map((e) => e.event_id)).not.toContain('order-j1');
    const relinked = await service.db.query(`SELECT kind FROM identity_nodes WHERE workspace_id = $1 AND value = ANY($2::text[])`, [ws, [JANE, JANE_PHONE, 'E.C.P.jane']]);
    expect(relinked.rows).toEqual([]);
  });

  it('a conversion built from the person\'s events before the erasure and filed after it is not sent (Kafka\'s in-flight case)', async () => {
    const before = oldEnvelope.received_at;
    const late = [
      conversion(ws, { event_id: 'late-email', received_at: before, record: { user: { email: [JANE] } } }),
      conversion(ws, { event_id: 'late-user', received_at: before, record: { user: { external_id: [sha256('u-jane')] } } }),
      // The same person's hashed user id, received after the erasure: new data, sent.
      conversion(ws, { event_id: 'late-new', received_at: Date.now(), record: { user: { external_id: [sha256('u-jane')] } } }),
    ];
    await service.log!.append(Topics.conversionsReady, late.map((c) => ({ key: `${ws}:${c.event_id}`, value: c })), Date.now() + 10_000);
    await forwarded('late-new');
    await drained();
    const received = (await receivedBySandbox(sandbox)).map((e) => e.event_id);
    expect(received).not.toContain('late-email');
    expect(received).not.toContain('late-user');
    expect((await service.db.query(`SELECT 1 FROM forward_outbox WHERE workspace_id = $1`, [ws])).rows).toEqual([]);
  });
});

describe('erasure of conversions still waiting, by email hash', () => {
  it('removes the person\'s queued conversions from the outbox of a workspace not connected yet', async () => {
    const { ws, key } = await workspace(false);
    // A second destination, not connected yet either: it queues its own copies, which the erasure removes too.
    const meta = await admin.call('POST', `/admin/v1/workspaces/${ws}/destinations`, {
      kind: 'meta',
      name: 'Meta',
      setup: { pixel_id: '123', action_source: 'website', pii_mode: 'hashed', events: [{ name: 'purchase', platform_event: 'Purchase' }] },
    });
    expect(meta.status).toBe(201);
    const ANN = sha256('ann@example.com');
    await send(key, [
      serverEvent({ event_metadata: { idempotency_key: 'order-a1', identifiers: { ...NO_IDS, email: { sha256_email: ANN } } } }),
      serverEvent({ event_metadata: { idempotency_key: 'order-b1', identifiers: { ...NO_IDS, user: 'bob' } } }),
    ]);
    await eventually('two conversions queued', async () => (await service.db.query('SELECT 1 FROM forward_outbox WHERE workspace_id = $1', [ws])).rows.length === 2);
    await eventually('and two for the Meta destination', async () => (await service.db.query('SELECT 1 FROM destination_outbox WHERE workspace_id = $1', [ws])).rows.length === 2);
    const job = await erase(ws, { sha256_email: ANN.toUpperCase() });
    expect(job.removed).toMatchObject({ outbox: 2, why_records: 1 });
    expect((await service.db.query<{ event_id: string }>('SELECT event_id FROM destination_outbox WHERE workspace_id = $1', [ws])).rows).toEqual([{ event_id: 'order-b1' }]);
    const left = await service.db.query<{ event_id: string }>('SELECT event_id FROM forward_outbox WHERE workspace_id = $1', [ws]);
    expect(left.rows.map((r) => r.event_id)).toEqual(['order-b1']);
    // Bob's conversion still explains itself; Ann's does not exist any more.
    expect((await admin.call('GET', `/admin/v1/workspaces/${ws}/conversions/order-b1`)).body.delivery.status).toBe('queued');
    expect((await admin.call('GET', `/admin/v1/workspaces/${ws}/conversions/order-a1`)).status).toBe(404);
  });
});

describe('bad input', () => {
  let ws: string;
  let other: string;
  let erasureId: string;
  beforeAll(async () => {
    ws = (await admin.createWorkspace('privacy-bad')).id;
    other = (await admin.createWorkspace('privacy-other')).id;
    const r = await admin.call('POST', `/admin/v1/workspaces/${other}/erasures`, { identifiers: { client_id: 'cid-x' } });
    erasureId = r.body.id;
  });

  it.each([
    ['no body', undefined, /body/],
    ['no identifiers', {}, /identifiers/],
    ['empty identifiers', { identifiers: {} }, /identifiers/],
    ['a plain email in sha256_email', { identifiers: { sha256_email: 'jane@example.com' } }, /sha256_email/],
    ['a short hash', { identifiers: { sha256_phone: 'abc123' } }, /sha256_phone/],
    ['an unknown identifier', { identifiers: { email: 'jane@example.com' } }, /email/],
    ['an empty user id', { identifiers: { user: '' } }, /user/],
    ['identifiers not an object', { identifiers: ['u1'] }, /identifiers/],
  ])('POST erasures with %s: 400 naming the field', async (_what, body, field) => {
    const r = await admin.call('POST', `/admin/v1/workspaces/${ws}/erasures`, body);
    expect(r.status).toBe(400);
    expect(JSON.stringify(r.body)).toMatch(field);
  });

  it('not JSON: 400', async () => {
    const r = await fetch(`${url}/admin/v1/workspaces/${ws}/erasures`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, body: '{"identifiers":' });
    expect(r.status).toBe(400);
  });

  it('unknown workspace, unknown erasure, another workspace\'s erasure, unknown conversion: 404', async () => {
    expect((await admin.call('POST', '/admin/v1/workspaces/ws_nope/erasures', { identifiers: { user: 'u1' } })).status).toBe(404);
    expect((await admin.call('GET', `/admin/v1/workspaces/${ws}/erasures/era_nope`)).status).toBe(404);
    expect((await admin.call('GET', `/admin/v1/workspaces/${ws}/erasures/${erasureId}`)).status).toBe(404);
    expect((await admin.call('GET', `/admin/v1/workspaces/${other}/erasures/${erasureId}`)).status).toBe(200);
    const missing = await admin.call('GET', `/admin/v1/workspaces/${ws}/conversions/order-nope`);
    expect(missing.status).toBe(404);
    expect(missing.body.detail).toMatch(/order-nope/);
  });

  it('another workspace\'s conversion: 404', async () => {
    const { ws: mine, key } = await workspace(false);
    await send(key, [serverEvent({ event_metadata: { idempotency_key: 'order-mine' } })]);
    await eventually('explained', async () => (await admin.call('GET', `/admin/v1/workspaces/${mine}/conversions/order-mine`)).status === 200);
    expect((await admin.call('GET', `/admin/v1/workspaces/${ws}/conversions/order-mine`)).status).toBe(404);
  });

  it('without the admin token: 401', async () => {
    const r = await fetch(`${url}/admin/v1/workspaces/${ws}/erasures`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"identifiers":{"user":"u1"}}' });
    expect(r.status).toBe(401);
  });
});
