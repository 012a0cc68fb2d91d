/**
 * The data-team operations on the embedded runtime, as a user meets them: the whole service in this process over
 * real HTTP, the platform sandbox as the ad platform. Dead letters are listed, redriven after their cause is fixed
 * (delivered once), fail again with attempts raised, and are discarded with an audit entry; the export holds exactly
 * one workspace's accepted events of a range; the pipeline status shows every topic and partition.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Topics } from '../../services/shared/topics.js';
import type { RunningService } from '../../services/compose/service.js';
import type { RunningSandbox } from '../sandbox/server.js';
import type { AdminClient } from '../helpers/admin-client.js';
import { SETUP, startServiceWithSandbox, type ServiceWithSandbox } from '../helpers/service-with-sandbox.js';
import { webEvent } from '../helpers/factories.js';
import { eventually, receivedBySandbox, sandboxControl } from '../helpers/forwarder-rig.js';
import { csrfOf, newBrowser } from '../helpers/browser.js';
import { outboxEmptied } from '../helpers/outbox.js';

const ADMIN = 'data-team-e2e-admin-token';
let sandbox: RunningSandbox;
let service: RunningService;
let url: string;
let admin: AdminClient;


let running: ServiceWithSandbox;
const connectedWorkspace = (name: string) => running.connectedWorkspace(name);
const send = (key: string, events: unknown[]) => running.send(key, events);
beforeAll(async () => {
  running = await startServiceWithSandbox(ADMIN);
  ({ sandbox, service, url, admin } = running);
});
afterAll(async () => {
  await running?.close();
});
afterEach(async () => {
  await fetch(`${sandbox.controlUrl}/faults`, { method: 'DELETE' });
});

async function deliveries(eventId: string): Promise<Array<{ record: any }>> {
  return (await receivedBySandbox(sandbox)).filter((e) => e.event_id === eventId);
}
async function deadLetters(ws: string, query = ''): Promise<any[]> {
  const r = await admin.call('GET', `/admin/v1/workspaces/${ws}/dead-letters${query}`);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.items;
}
async function letterOf(ws: string, eventId: string, attempts = 1): Promise<any> {
  return eventually(`dead letter of ${eventId} with ${attempts} attempt(s)`, async () =>
    (await deadLetters(ws)).find((l) => l.event_id === eventId && l.attempts === attempts),
  15_000);
}
/** The platform refuses the next batch for good, as it does an event the pixel does not take. */
async function platformRefusesNextBatch(): Promise<void> {
  await sandboxControl(sandbox, '/faults', { events: [{ code: 40002, message: 'data[0].event: event "Purchase" is not enabled for this pixel', times: 1 }] });
}
const redrive = (ws: string, body: unknown) => admin.call('POST', `/admin/v1/workspaces/${ws}/dead-letters/redrive`, body);

describe('dead letters', () => {
  it('a conversion dead-lettered for a wrong event mapping is redriven after the mapping is fixed and reaches the platform once', async () => {
    const { ws, key } = await connectedWorkspace('dl-mapping');
    await platformRefusesNextBatch();
    const event = webEvent();
    await send(key, [event]);
    const eventId = event.event_metadata.idempotency_key;
    const letter = await letterOf(ws, eventId);
    expect(letter).toMatchObject({ stage: 'forwarder', topic: 'conversions.dlq', reason: 'platform_rejected', attempts: 1, status: 'dead' });
    expect(letter.error).toContain('not enabled for this pixel');
    expect(Date.parse(letter.first_failed_at)).toBeLessThanOrEqual(Date.parse(letter.last_failed_at));
    expect(await deliveries(eventId)).toHaveLength(0);

    // The mapping is fixed; the letter goes back under today's setup.
    const fixed = { ...SETUP, events: [{ name: 'purchase', platform_event: 'CompletePayment' }] };
    expect((await admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, fixed)).status).toBe(200);
    expect(await redrive(ws, { ids: [letter.id] })).toMatchObject({ status: 202, body: { redriven: 1, failed: [] } });
    await eventually('redriven conversion delivered', async () => (await deliveries(eventId)).length > 0);
    await outboxEmptied(service.db, ws); // a second delivery, if there were one, has been answered by now
    const delivered = await deliveries(eventId);
    expect(delivered).toHaveLength(1);
    expect(delivered[0]!.record.event).toBe('CompletePayment');
    expect(await deadLetters(ws)).toEqual([]);
    expect((await deadLetters(ws, '?status=redriven')).map((l) => l.id)).toEqual([letter.id]);
    // Once only: the letter is no longer dead.
    expect((await redrive(ws, { ids: [letter.id] })).status).toBe(409);
    const audit = await service.db.query<{ action: string; detail: any }>("SELECT action, detail FROM audit_log WHERE workspace_id = $1 AND action = 'dead_letters.redriven'", [ws]);
    expect(audit.rows).toEqual([{ action: 'dead_letters.redriven', detail: { redriven: 1, all: false, failed: [] } }]);
  });

  it('a redriven conversion that fails again returns with its attempts raised, and is delivered once its cause is gone', async () => {
    const { ws, key } = await connectedWorkspace('dl-again');
    await platformRefusesNextBatch();
    const event = webEvent();
    await send(key, [event]);
    const eventId = event.event_metadata.idempotency_key;
    const first = await letterOf(ws, eventId, 1);

    // Cannot go back: its event is no longer selected. It stays, attempts raised, with the reason.
    expect((await admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, { ...SETUP, events: [{ name: 'sign_up', platform_event: 'CompleteRegistration' }] })).status).toBe(200);
    const refused = await redrive(ws, { all: true });
    expect(refused).toMatchObject({ status: 202, body: { redriven: 0 } });
    expect(refused.body.failed).toEqual([{ id: first.id, error: expect.stringContaining('"purchase" is not selected') }]);
    expect(await letterOf(ws, eventId, 2)).toMatchObject({ id: first.id, status: 'dead' });

    // Goes back, and the platform refuses it again: back among the dead letters, same letter, one attempt more.
    expect((await admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, SETUP)).status).toBe(200);
    await platformRefusesNextBatch();
    expect(await redrive(ws, { all: true })).toMatchObject({ status: 202, body: { redriven: 1 } });
    const third = await letterOf(ws, eventId, 3);
    expect(third).toMatchObject({ id: first.id, reason: 'platform_rejected', status: 'dead' });
    expect(Date.parse(third.last_failed_at)).toBeGreaterThan(Date.parse(first.last_failed_at));

    expect(await redrive(ws, { ids: [first.id] })).toMatchObject({ status: 202, body: { redriven: 1 } });
    await eventually('delivered at last', async () => (await deliveries(eventId)).length === 1);
    expect(await deadLetters(ws)).toEqual([]);
  });

  it('a record a stage cannot process is a dead letter of its stage; redriven, it fails again with attempts raised', async () => {
    const ws = (await admin.createWorkspace('dl-stage')).id;
    // What the gateway never writes: an envelope of this workspace that the envelope check refuses.
    const broken = { v: 1, workspace_id: ws, name: 'purchase' };
    await service.log!.append(Topics.eventsRaw, [{ key: `${ws}:broken-1`, value: broken }], Date.now() + 10_000);
    const letter = await eventually('stage dead letter', async () => (await deadLetters(ws))[0]);
    expect(letter).toMatchObject({ stage: 'dedupe', topic: 'events.dlq', reason: 'invalid_envelope', attempts: 1 });
    const one = await admin.call('GET', `/admin/v1/workspaces/${ws}/dead-letters/${letter.id}`);
    expect(one.status).toBe(200);
    expect(one.body.value).toMatchObject({ stage: 'dedupe', source_topic: 'events.raw', key: `${ws}:broken-1`, value: broken });

    expect(await redrive(ws, { ids: [letter.id] })).toMatchObject({ status: 202, body: { redriven: 1 } });
    const again = await eventually('back with attempts 2', async () => (await deadLetters(ws)).find((l) => l.attempts === 2));
    expect(again).toMatchObject({ id: letter.id, stage: 'dedupe', status: 'dead' });
    expect(await deadLetters(ws)).toHaveLength(1);
  });

  it('the console\'s Activity page lists the waiting letters and an owner redrives them (a member may not)', async () => {
    const ws = (await admin.createWorkspace('dl-console')).id;
    await service.log!.append(Topics.eventsRaw, [{ key: `${ws}:broken-c`, value: { v: 1, workspace_id: ws, name: 'purchase' } }], Date.now() + 10_000);
    const letter = await eventually('stage dead letter', async () => (await deadLetters(ws))[0]);
    for (const [email, role] of [['owner@dl.example', 'owner'], ['member@dl.example', 'member']] as const) {
      expect((await admin.call('POST', `/admin/v1/workspaces/${ws}/members`, { email, password: 'correct horse battery', role })).status).toBe(201);
    }
    const signIn = async (email: string) => {
      const browser = newBrowser();
      const page = await (await browser.open(`${url}/console`)).text();
      const home = await browser.submit(`${url}/console/sign-in`, { email, password: 'correct horse battery', _csrf: csrfOf(page) });
      expect(home.status).toBe(200);
      return browser;
    };

    const member = await signIn('member@dl.example');
    const seen = await (await member.open(`${url}/console/w/${ws}/activity`)).text();
    expect(seen).toContain('invalid_envelope');
    expect(seen).toContain('Only owners of this workspace send dead letters again.');
    expect(seen).not.toContain(`value="${letter.id}"`);
    const refused = await member.submit(`${url}/console/w/${ws}/activity/dead-letters/redrive`, { _csrf: csrfOf(seen), id: letter.id });
    expect(refused.status).toBe(403);

    const owner = await signIn('owner@dl.example');
    const page = await (await owner.open(`${url}/console/w/${ws}/activity`)).text();
    expect(page).toContain(`value="${letter.id}"`);
    const after = await owner.submit(`${url}/console/w/${ws}/activity/dead-letters/redrive`, { _csrf: csrfOf(page), id: letter.id });
    expect(after.status).toBe(200);
    expect(await after.text()).toContain('1 dead letter sent again.');
    // It fails in its stage again: back on the page with 2 attempts; the audit log names the owner.
    await eventually('back with attempts 2', async () => (await deadLetters(ws)).find((l) => l.id === letter.id && l.attempts === 2));
    const audit = await service.db.query<{ actor: string }>(`SELECT actor FROM audit_log WHERE workspace_id = $1 AND action = 'dead_letters.redriven'`, [ws]);
    expect(audit.rows.map((r) => r.actor).join()).toContain('owner@dl.example');
    // Nothing ticked: a hint, nothing sent.
    const empty = await owner.submit(`${url}/console/w/${ws}/activity/dead-letters/redrive`, { _csrf: csrfOf(await (await owner.open(`${url}/console/w/${ws}/activity`)).text()) });
    expect(await empty.text()).toContain('Tick the dead letters to send again');
    // Without the form's token: refused.
    expect((await owner.submit(`${url}/console/w/${ws}/activity/dead-letters/redrive`, { id: letter.id })).status).toBe(403);
  });

  it('discarding a dead letter deletes it and leaves an audit entry', async () => {
    const { ws, key } = await connectedWorkspace('dl-discard');
    await platformRefusesNextBatch();
    const event = webEvent();
    await send(key, [event]);
    const letter = await letterOf(ws, event.event_metadata.idempotency_key);
    const r = await admin.call('DELETE', `/admin/v1/workspaces/${ws}/dead-letters/${letter.id}`);
    expect(r.status).toBe(204);
    expect(await deadLetters(ws)).toEqual([]);
    expect((await admin.call('GET', `/admin/v1/workspaces/${ws}/dead-letters/${letter.id}`)).status).toBe(404);
    expect((await admin.call('DELETE', `/admin/v1/workspaces/${ws}/dead-letters/${letter.id}`)).status).toBe(404);
    const audit = await service.db.query<{ action: string; actor: string; detail: any }>('SELECT action, actor, detail FROM audit_log WHERE workspace_id = $1', [ws]);
    expect(audit.rows).toContainEqual({
      action: 'dead_letter.discarded',
      actor: 'admin',
      detail: expect.objectContaining({ id: letter.id, stage: 'forwarder', reason: 'platform_rejected', event_id: event.event_metadata.idempotency_key, attempts: 1 }),
    });
  });

  it('pages with a cursor', async () => {
    const ws = (await admin.createWorkspace('dl-pages')).id;
    await service.log!.append(Topics.eventsRaw, [1, 2, 3].map((i) => ({ key: `${ws}:p-${i}`, value: { v: 1, workspace_id: ws } })), Date.now() + 10_000);
    await eventually('three letters', async () => (await deadLetters(ws)).length === 3);
    const first = await admin.call('GET', `/admin/v1/workspaces/${ws}/dead-letters?limit=2`);
    expect(first.body.items).toHaveLength(2);
    expect(first.body.next).toEqual(expect.any(String));
    const second = await admin.call('GET', `/admin/v1/workspaces/${ws}/dead-letters?limit=2&cursor=${first.body.next}`);
    expect(second.body.items).toHaveLength(1);
    expect(second.body.next).toBeNull();
    const ids = [...first.body.items, ...second.body.items].map((l: any) => l.id);
    expect(new Set(ids).size).toBe(3);
    expect((await deadLetters(ws, '?stage=enrich'))).toEqual([]);
  });
});

describe('export', () => {
  it('streams exactly the workspace\'s accepted events of the range as NDJSON', async () => {
    const { a, from, to, inRange } = await running.exportScenario(3);

    const r = await fetch(`${url}/admin/v1/workspaces/${a.ws}/events/export?from=${from}&to=${to}`, { headers: { authorization: `Bearer ${ADMIN}` } });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('application/x-ndjson');
    const text = await r.text();
    expect(text.endsWith('\n')).toBe(true);
    const lines = text.trimEnd().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((e) => e.idempotency_key)).toEqual(inRange.map((e) => e.event_metadata.idempotency_key));
    expect(lines.every((e) => e.workspace_id === a.ws)).toBe(true);
    expect(lines[1]).toMatchObject({ name: 'page_view', key_mode: 'live', endpoint: 'events' });

    // An empty range is an empty body, not an error.
    const empty = await fetch(`${url}/admin/v1/workspaces/${a.ws}/events/export?from=2020-01-01T00:00:00Z&to=2020-01-02T00:00:00Z`, { headers: { authorization: `Bearer ${ADMIN}` } });
    expect(empty.status).toBe(200);
    expect(await empty.text()).toBe('');
  });
});

describe('pipeline status', () => {
  it('shows every topic and stage per partition, dead letters per stage, and replays', async () => {
    const r = await admin.call('GET', '/admin/v1/pipeline');
    expect(r.status).toBe(200);
    const s = r.body;
    expect(s.runtime).toBe('embedded');
    expect(s.topics.map((t: any) => t.topic).sort()).toEqual(Object.values(Topics).sort());
    for (const t of s.topics) {
      expect(t.partitions).toHaveLength(1);
      expect(t.partitions[0]).toMatchObject({ partition: 0, records: t.records });
    }
    const raw = s.topics.find((t: any) => t.topic === 'events.raw');
    const rawCount = await service.db.query<{ n: unknown }>("SELECT count(*) AS n FROM log_records WHERE topic = 'events.raw'");
    expect(raw.records).toBe(Number(rawCount.rows[0]!.n));
    expect(s.consumers.map((c: any) => `${c.group} ${c.topic}`).sort()).toEqual(['dedupe events.raw', 'enrich events.deduped', 'forwarder conversions.ready', 'identity-sink identity.graph-changes']);
    for (const c of s.consumers) {
      expect(c.partitions).toEqual([{ partition: 0, committed_offset: c.offset, end_offset: expect.any(Number), lag: c.lag }]);
    }
    const byStage = new Map(s.dead_letters.map((d: any) => [d.stage, d]));
    expect(byStage.get('dedupe')).toMatchObject({ topic: 'events.dlq', count: expect.any(Number), oldest: expect.any(String) });
    expect((byStage.get('dedupe') as any).count).toBeGreaterThanOrEqual(1);
    expect(s.replays).toEqual([]);
  });
});

describe('bad input', () => {
  const problem = (r: { status: number; body: any }, status: number, detail?: string) => {
    expect(r.status, JSON.stringify(r.body)).toBe(status);
    expect(r.body).toMatchObject({ status, type: expect.any(String), title: expect.any(String) });
    if (detail) expect(r.body.detail).toContain(detail);
  };
  let ws: string;
  let other: { ws: string; letter: string };
  beforeAll(async () => {
    ws = (await admin.createWorkspace('bad-input')).id;
    const otherWs = (await admin.createWorkspace('bad-input-other')).id;
    await service.log!.append(Topics.eventsRaw, [{ key: `${otherWs}:x`, value: { v: 1, workspace_id: otherWs } }], Date.now() + 10_000);
    const letter = await eventually('other workspace letter', async () => (await deadLetters(otherWs))[0]);
    other = { ws: otherWs, letter: letter.id };
  });

  it('refuses unknown workspaces, bad cursors and bad queries on the list', async () => {
    problem(await admin.call('GET', '/admin/v1/workspaces/ws_nope/dead-letters'), 404);
    // Well-formed, but not a cursor this list gave: 422.
    problem(await admin.call('GET', `/admin/v1/workspaces/${ws}/dead-letters?cursor=bm9wZQ`), 422, 'cursor');
    problem(await admin.call('GET', `/admin/v1/workspaces/${ws}/dead-letters?limit=0`), 400, 'limit');
    problem(await admin.call('GET', `/admin/v1/workspaces/${ws}/dead-letters?status=lost`), 400, 'status');
    problem(await admin.call('GET', `/admin/v1/workspaces/${ws}/dead-letters?stage=gateway`), 400, 'stage');
    expect((await fetch(`${url}/admin/v1/workspaces/${ws}/dead-letters`)).status).toBe(401);
  });

  it('refuses bad ids, and answers 404 for another workspace\'s letters', async () => {
    problem(await admin.call('GET', `/admin/v1/workspaces/${ws}/dead-letters/not-an-id`), 400, 'id');
    problem(await admin.call('GET', `/admin/v1/workspaces/${ws}/dead-letters/${other.letter}`), 404);
    problem(await admin.call('DELETE', `/admin/v1/workspaces/${ws}/dead-letters/${other.letter}`), 404);
    problem(await redrive(ws, { ids: [other.letter] }), 404, other.letter);
    // Still there for its own workspace.
    expect((await admin.call('GET', `/admin/v1/workspaces/${other.ws}/dead-letters/${other.letter}`)).status).toBe(200);
  });

  it.each([
    ['an empty body', {}],
    ['both ids and all', { ids: ['dl_0123456789abcdef'], all: true }],
    ['an empty id list', { ids: [] }],
    ['a malformed id', { ids: ['nope'] }],
    ['all: false', { all: false }],
    ['an unknown field', { everything: true }],
  ])('refuses a redrive with %s', async (_what, body) => {
    problem(await redrive(ws, body), 400);
  });

  it.each([
    ['no from', '?to=2026-01-01T00:00:00Z', 400, 'from'],
    ['no to', '?from=2026-01-01T00:00:00Z', 400, 'to'],
    ['a time that is not RFC 3339', '?from=yesterday&to=2026-01-01T00:00:00Z', 400, 'from'],
    ['a date without time', '?from=2026-01-01&to=2026-01-02T00:00:00Z', 400, 'from'],
    // Each time valid alone, the range not: 422.
    ['from after to', '?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z', 422, 'to'],
    ['an empty range', '?from=2026-01-01T00:00:00Z&to=2026-01-01T00:00:00Z', 422, 'to'],
  ])('refuses an export with %s', async (_what, query, status, field) => {
    problem(await admin.call('GET', `/admin/v1/workspaces/${ws}/events/export${query}`), status as number, field as string);
  });

  it.each([
    ['an unknown topic', '/admin/v1/topics/no.such.topic/records', 'topic'],
    ['last 0', '/admin/v1/topics/events.raw/records?last=0', 'last'],
    ['last not a number', '/admin/v1/topics/events.raw/records?last=many', 'last'],
  ])('refuses topic records with %s', async (_what, path, field) => {
    problem(await admin.call('GET', path), 400, field);
  });

  it('reads a topic\'s records, decoded, filtered by key prefix', async () => {
    const r = await fetch(`${url}/admin/v1/topics/events.dlq/records?key_prefix=${encodeURIComponent(`${other.ws}:`)}`, { headers: { authorization: `Bearer ${ADMIN}` } });
    expect(r.status).toBe(200);
    const lines = (await r.text()).trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).toEqual([expect.objectContaining({ topic: 'events.dlq', partition: 0, key: `${other.ws}:x`, value: expect.objectContaining({ stage: 'dedupe' }) })]);
    expect((await fetch(`${url}/admin/v1/topics/events.dlq/records`)).status).toBe(401);
  });

  it('answers 404 for the export of an unknown workspace', async () => {
    problem(await admin.call('GET', '/admin/v1/workspaces/ws_nope/events/export?from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z'), 404);
  });
});
