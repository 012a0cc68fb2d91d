import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../compose/app.js';
import { loadConfig } from '../../shared/config.js';
import type { Db } from '../../shared/db/db.js';
import { openDatabase } from '../../shared/db/open.js';
import { silentLogger } from '../../shared/logger.js';
import { forwardingRoutes } from './forwarding.js';
import { pipelineRoutes } from './pipeline.js';
import { DeadLetterRepo } from '../../datateam/dead-letter-repo.js';
import { embeddedPositions } from '../../datateam/log-positions.js';

const ADMIN = 'test-admin-token-0123456789';
const auth = { authorization: `Bearer ${ADMIN}` };
let app: FastifyInstance;
let db: Db;

beforeAll(async () => {
  db = await openDatabase({ inMemory: true });
  app = await buildApp({
    config: loadConfig({ ADMIN_TOKEN: ADMIN, PUBLIC_BASE_URL: 'http://ingest.test' }),
    db,
    logger: silentLogger,
    admin: true,
    adminExtensions: [(scope) => forwardingRoutes(scope, { db }), (scope) =>
        pipelineRoutes(scope, { runtime: 'embedded', positions: embeddedPositions(db, [{ group: 'dedupe', topic: 'events.raw' }, { group: 'enrich', topic: 'events.deduped' }]), deadLetters: new DeadLetterRepo(db) }),
    ],
  });
  await app.ready();
});
afterAll(async () => {
  await app?.close();
  await db?.close();
});

/** The operator contract's example body, verbatim. */
const CONTRACT_BODY = {
  event_source: 'WEB', event_source_id: 'PIXEL123', pii_mode: 'hashed',
  click_window_days: 7, test_event_code: 'TEST123',
  events: [{ name: 'purchase', platform_event: 'CompletePayment' },
    { name: 'sign_up', platform_event: 'CompleteRegistration' }],
};

async function newWorkspace(): Promise<string> {
  const r = await app.inject({ method: 'POST', url: '/admin/v1/workspaces', headers: auth, payload: { name: 'acme' } });
  return r.json().id;
}
const put = (ws: string, payload: unknown, headers: Record<string, string> = auth) =>
  app.inject({ method: 'PUT', url: `/admin/v1/workspaces/${ws}/forwarding`, headers, payload: payload as object });

describe('PUT/GET /admin/v1/workspaces/{ws}/forwarding', () => {
  it('stores the contract body and answers 200 with the stored setup; GET reads it back', async () => {
    const ws = await newWorkspace();
    const r = await put(ws, CONTRACT_BODY);
    expect(r.statusCode).toBe(200);
    const stored = r.json();
    expect(stored).toMatchObject({ workspace_id: ws, ...CONTRACT_BODY });
    expect(Date.parse(stored.updated_at)).not.toBeNaN();
    const g = await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/forwarding`, headers: auth });
    expect(g.statusCode).toBe(200);
    expect(g.json()).toEqual(stored);
  });

  it('replaces the setup whole: an omitted test_event_code is cleared', async () => {
    const ws = await newWorkspace();
    await put(ws, CONTRACT_BODY);
    const { test_event_code: _omitted, ...rest } = CONTRACT_BODY;
    const r = await put(ws, { ...rest, pii_mode: 'none', events: [{ name: 'lead', platform_event: 'SubmitForm' }] });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toMatchObject({ pii_mode: 'none', test_event_code: null, events: [{ name: 'lead', platform_event: 'SubmitForm' }] });
  });

  it('records the change in the audit log', async () => {
    const ws = await newWorkspace();
    await put(ws, CONTRACT_BODY);
    const a = await db.query<{ action: string }>('SELECT action FROM audit_log WHERE workspace_id = $1', [ws]);
    expect(a.rows.map((r) => r.action)).toContain('forwarding.updated');
  });

  it.each([
    { name: 'PUT for an unknown workspace', method: 'PUT' as const, ws: 'ws_nope', payload: CONTRACT_BODY },
    { name: 'GET for an unknown workspace', method: 'GET' as const, ws: 'ws_nope', payload: undefined },
  ])('404: $name', async ({ method, ws, payload }) => {
    const r = await app.inject({ method, url: `/admin/v1/workspaces/${ws}/forwarding`, headers: auth, payload });
    expect(r.statusCode).toBe(404);
    expect(r.headers['content-type']).toContain('application/problem+json');
  });

  it('404 for GET before any setup', async () => {
    const ws = await newWorkspace();
    expect((await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/forwarding`, headers: auth })).statusCode).toBe(404);
  });

  it('401 without the admin token', async () => {
    const ws = await newWorkspace();
    expect((await put(ws, CONTRACT_BODY, {})).statusCode).toBe(401);
    expect((await put(ws, CONTRACT_BODY, { authorization: 'Bearer wrong-token-wrong-token' })).statusCode).toBe(401);
  });
});

describe('forwarding setup: bad input is a 400 problem document', () => {
  const without = (field: string) => Object.fromEntries(Object.entries(CONTRACT_BODY).filter(([k]) => k !== field));
  it.each([
    { name: 'event_source missing', body: without('event_source') },
    { name: 'event_source_id missing', body: without('event_source_id') },
    { name: 'event_source_id empty', body: { ...CONTRACT_BODY, event_source_id: '' } },
    { name: 'event_source blank', body: { ...CONTRACT_BODY, event_source: '   ' } },
    { name: 'pii_mode missing', body: without('pii_mode') },
    { name: 'pii_mode unknown', body: { ...CONTRACT_BODY, pii_mode: 'plain' } },
    { name: 'click_window_days 0', body: { ...CONTRACT_BODY, click_window_days: 0 } },
    { name: 'click_window_days 91', body: { ...CONTRACT_BODY, click_window_days: 91 } },
    { name: 'click_window_days fractional', body: { ...CONTRACT_BODY, click_window_days: 7.5 } },
    { name: 'click_window_days not a number', body: { ...CONTRACT_BODY, click_window_days: 'a week' } },
    { name: 'test_event_code empty', body: { ...CONTRACT_BODY, test_event_code: '' } },
    { name: 'events missing', body: without('events') },
    { name: 'events not an array', body: { ...CONTRACT_BODY, events: { purchase: 'CompletePayment' } } },
    { name: 'an event without platform_event', body: { ...CONTRACT_BODY, events: [{ name: 'purchase' }] } },
    { name: 'an event with an empty platform_event', body: { ...CONTRACT_BODY, events: [{ name: 'purchase', platform_event: '' }] } },
    { name: 'an event without name', body: { ...CONTRACT_BODY, events: [{ platform_event: 'CompletePayment' }] } },
    { name: 'a body that is an array', body: [CONTRACT_BODY] },
  ])('$name', async ({ body }) => {
    const ws = await newWorkspace();
    const r = await put(ws, body);
    expect(r.statusCode).toBe(400);
    expect(r.headers['content-type']).toContain('application/problem+json');
    expect(r.json()).toMatchObject({ status: 400, type: expect.stringContaining('/problems/'), detail: expect.any(String) });
    expect((await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/forwarding`, headers: auth })).statusCode).toBe(404);
  });

  it.each([
    { field: 'events[0].platform_event', body: { ...CONTRACT_BODY, events: [{ name: 'purchase', platform_event: 'Purchse' }] }, values: ['CompletePayment', 'Purchase', 'ViewContent'] },
    { field: 'pii_mode', body: { ...CONTRACT_BODY, pii_mode: 'plain' }, values: ['hashed', 'none'] },
  ])('a misspelt enum value ($field) is refused, naming the field and every allowed value', async ({ field, body, values }) => {
    const ws = await newWorkspace();
    const r = await put(ws, body);
    expect(r.statusCode).toBe(400);
    expect(r.json().detail).toContain(`${field} must be one of `);
    for (const v of values) expect(r.json().detail).toContain(v);
  });

  it('names the repeated event', async () => {
    const ws = await newWorkspace();
    const r = await put(ws, { ...CONTRACT_BODY, events: [...CONTRACT_BODY.events, { name: 'purchase', platform_event: 'PlaceAnOrder' }] });
    expect(r.statusCode).toBe(422);
    expect(r.json().detail).toContain('"purchase" is listed more than once');
  });
});

describe('GET /admin/v1/pipeline', () => {
  it('reports every topic\'s end and each consumer\'s committed offset and lag, a stage that never committed included', async () => {
    await db.query(`INSERT INTO log_records (topic, key, value) VALUES ('events.raw', 'k', '{}'), ('events.raw', 'k', '{}')`);
    await db.query(`INSERT INTO log_records (topic, key, value) VALUES ('events.deduped', 'k', '{}')`);
    const end = (await db.query<{ o: unknown }>(`SELECT max("offset") AS o FROM log_records WHERE topic = 'events.raw'`)).rows[0]!.o;
    await db.query(`INSERT INTO consumer_offsets (group_id, topic, "offset") VALUES ('dedupe', 'events.raw', $1)`, [Number(end) - 1]);
    const r = await app.inject({ method: 'GET', url: '/admin/v1/pipeline', headers: auth });
    expect(r.statusCode).toBe(200);
    const body = r.json();
    expect(body.runtime).toBe('embedded');
    expect(body.topics).toContainEqual({
      topic: 'events.raw',
      end_offset: Number(end),
      records: 2,
      partitions: [{ partition: 0, log_start_offset: Number(end) - 1, end_offset: Number(end), records: 2 }],
    });
    expect(body.topics).toContainEqual({ topic: 'conversions.ready', end_offset: 0, records: 0, partitions: [{ partition: 0, log_start_offset: 0, end_offset: 0, records: 0 }] });
    const deduped = Number((await db.query<{ o: unknown }>(`SELECT max("offset") AS o FROM log_records WHERE topic = 'events.deduped'`)).rows[0]!.o);
    // enrich has no committed offset yet: listed with every record of its topic as its lag, as on Kafka, so "every
    // lag is 0" cannot hold before it took its first batch.
    expect(body.consumers).toEqual([
      { group: 'enrich', topic: 'events.deduped', offset: null, lag: 1, partitions: [{ partition: 0, committed_offset: null, end_offset: deduped, lag: 1 }] },
      { group: 'dedupe', topic: 'events.raw', offset: Number(end) - 1, lag: 1, partitions: [{ partition: 0, committed_offset: Number(end) - 1, end_offset: Number(end), lag: 1 }] },
    ]);
    expect(body.dead_letters).toEqual([]);
    expect(body.replays).toEqual([]);
    expect((await app.inject({ method: 'GET', url: '/admin/v1/pipeline' })).statusCode).toBe(401);
  });
});
