/**
 * The roles as separate services on Kafka: two gateway replicas (SERVICE_ROLE=gateway) behind the same workspace, the
 * admin API in a console process, dedupe in a process of its own. Both replicas write the workspace's events to
 * events.raw keyed `workspace:idempotency-key` (so a key's events share a partition whichever replica took them), and
 * the same key sent to both replicas passes dedupe once. A 12 MB body gets a 413 a client can read. And the console
 * on this runtime (its own tests run on the embedded default): a member signs in, creates a named key
 * through the API Key page, a gateway takes an event with it, and the page then shows the key as used; a workspace
 * the user does not belong to answers 404 by URL, and a form without its CSRF token is refused. The identity graph's
 * sink in processes of its own (GRAPH_SINK_ROLE=identity-sink): enrich then leaves the queryable tables alone, and an
 * identity-sink process writes them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventEnvelope } from '../../services/domain/envelope.js';
import { STAGE_GROUP_HEADER } from '../../services/stream/kafka/runner.js';
import { Topics } from '../../services/shared/topics.js';
import { adminClient } from '../helpers/admin-client.js';
import { csrfOf, newBrowser } from '../helpers/browser.js';
import { postInPieces } from '../helpers/http.js';
import { webEvent } from '../helpers/factories.js';
import { freshDatabase, infraEnv, kafkaKit, tally, waitFor, type KafkaKit } from '../helpers/infra.js';
import { TEST_ADMIN_TOKEN } from '../helpers/service-process.js';
import { killAll, startKafkaService } from './fixtures/processes.js';

let kit: KafkaKit;
let database: Awaited<ReturnType<typeof freshDatabase>>;

beforeAll(async () => {
  kit = await kafkaKit(infraEnv());
  database = await freshDatabase(infraEnv().DATABASE_URL);
});
afterAll(async () => {
  await killAll();
  await kit?.close();
  await database?.drop();
});

/** One role of the service on Kafka and this file's database, its consumer groups named `<prefix><stage>`. */
const startRole = (prefix: string, role: string, extra?: Record<string, string>) =>
  startKafkaService(infraEnv(), { databaseUrl: database.url, groupPrefix: prefix, role, extra });

/** A console and a gateway, and an admin client of the console. */
async function consoleAndGateway(prefix: string) {
  const [console_, gateway] = await Promise.all([startRole(prefix, 'console'), startRole(prefix, 'gateway')]);
  return { console_, gateway, admin: adminClient(console_.url, TEST_ADMIN_TOKEN) };
}

describe('two gateway replicas, roles in separate processes', () => {
  it('takes the same workspace on both replicas; each key lands on one partition and passes dedupe once', async () => {
    const prefix = `${kit.groupPrefix}gw-`;
    await kit.startGroupsAtEnd([{ groupId: `${prefix}dedupe`, topic: Topics.eventsRaw }]);
    const fromRaw = await kit.ends(Topics.eventsRaw);
    const fromDeduped = await kit.ends(Topics.eventsDeduped);
    const start = (role: string) => startRole(prefix, role);
    const [console_, g1, g2, dedupe] = await Promise.all([start('console'), start('gateway'), start('gateway'), start('dedupe')]);

    // Each process serves only its role.
    expect((await fetch(`${g1.url}/admin/v1/workspaces`, { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } })).status).toBe(404);
    expect((await fetch(`${console_.url}/v1/events`, { method: 'POST' })).status).toBe(404);
    const admin = adminClient(console_.url, TEST_ADMIN_TOKEN);
    const ws = (await admin.createWorkspace('replicas')).id;
    const key = (await admin.createKey(ws, 'live')).key;

    const post = async (url: string, idem: string): Promise<number> => {
      const r = await fetch(`${url}/v1/events`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify([webEvent({ event_metadata: { idempotency_key: idem } })]),
      });
      await r.arrayBuffer();
      return r.status;
    };
    const keys = Array.from({ length: 60 }, (_, i) => `g-${i}`);
    // Every key to both replicas at the same time, and every third key once more to the first.
    const statuses = await Promise.all(keys.flatMap((k, i) => [post(g1.url, k), post(g2.url, k), ...(i % 3 === 0 ? [post(g1.url, k)] : [])]));
    expect(new Set(statuses)).toEqual(new Set([202]));

    const raw = (await kit.read<EventEnvelope>(Topics.eventsRaw, fromRaw)).filter((r) => r.value.workspace_id === ws);
    expect(raw).toHaveLength(statuses.length);
    const partitions = new Map<string, Set<number>>();
    for (const r of raw) {
      expect(r.key).toBe(`${ws}:${r.value.idempotency_key}`);
      partitions.set(r.key, (partitions.get(r.key) ?? new Set()).add(r.partition));
    }
    expect([...partitions.values()].every((p) => p.size === 1)).toBe(true);
    // Requests of both replicas: their request ids are distinct, so both gateways wrote each key.
    expect(new Set(raw.map((r) => r.value.request_id)).size).toBe(statuses.length);

    const written = await kit.ends(Topics.eventsRaw);
    await waitFor('dedupe drained events.raw', () => kit.drained(`${prefix}dedupe`, Topics.eventsRaw, written), 60_000, 200);
    const deduped = (await kit.read<EventEnvelope>(Topics.eventsDeduped, fromDeduped)).filter(
      (r) => r.value.workspace_id === ws && r.headers[STAGE_GROUP_HEADER] === `${prefix}dedupe`,
    );
    expect(tally(deduped.map((r) => r.value.idempotency_key!))).toEqual(new Map(keys.map((k) => [k, 1])));

    for (const p of [g1, g2, console_, dedupe]) expect(await p.stop()).toBe(0);
  });

  it('runs the graph sink only where GRAPH_SINK_ROLE says: not beside enrich, in an identity-sink process', async () => {
    const prefix = `${kit.groupPrefix}sink-`;
    await kit.startStagesAtEnd(prefix);
    const split = { GRAPH_SINK_ROLE: 'identity-sink' };
    const start = (role: string) => startRole(prefix, role, split);
    const [console_, gateway, dedupe, enrich] = await Promise.all([start('console'), start('gateway'), start('dedupe'), start('enrich')]);
    const admin = adminClient(console_.url, TEST_ADMIN_TOKEN);
    const ws = (await admin.createWorkspace('sink-role')).id;
    const key = (await admin.createKey(ws, 'live')).key;
    const fromChanges = await kit.ends(Topics.identityChanges);
    const r = await fetch(`${gateway.url}/v1/events`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify([webEvent({ event_data: { client_id: 'cid-sink', session_id: 'sid-sink' }, event_metadata: { idempotency_key: 'sink-1' } })]),
    });
    expect(r.status).toBe(202);

    // Enrich linked the event (its changes are on identity.graph-changes) and wrote no row of it.
    await waitFor('enrich emitted the graph changes', async () =>
      (await kit.read<{ workspace_id: string }>(Topics.identityChanges, fromChanges)).some((c) => c.value.workspace_id === ws),
    60_000, 200);
    const rows = async () => (await database.db.query('SELECT kind, value FROM identity_nodes WHERE workspace_id = $1', [ws])).rows;
    const written = await kit.ends(Topics.identityChanges);
    // Beside enrich, the sink would have taken them within its gather time (1 s).
    await new Promise((done) => setTimeout(done, 3_000));
    expect(await rows()).toEqual([]);
    expect(await kit.drained(`${prefix}identity-sink`, Topics.identityChanges, written)).toBe(false);

    // An identity-sink process writes them.
    const sink = await start('identity-sink');
    await waitFor('the identity-sink process wrote the nodes', async () => ((await rows()).some((n) => n.value === 'cid-sink') ? true : undefined), 60_000, 200);
    for (const p of [sink, enrich, dedupe, gateway, console_]) expect(await p.stop()).toBe(0);
  });

  it('answers a 12 MB body with a 413 that common clients read, stores nothing of it and keeps serving (issue 14, finding 6)', async () => {
    const { console_, gateway, admin } = await consoleAndGateway(`${kit.groupPrefix}gw413-`);
    const ws = (await admin.createWorkspace('oversized')).id;
    const key = (await admin.createKey(ws, 'live')).key;
    const fromRaw = await kit.ends(Topics.eventsRaw);
    const huge = Buffer.alloc(12 * 1024 * 1024, 0x20);
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };

    // fetch (undici) sends the whole body at once; node:http below sends it in pieces, as a slower link would.
    const viaFetch = await fetch(`${gateway.url}/v1/events`, { method: 'POST', headers, body: huge });
    expect(viaFetch.status).toBe(413);
    expect(viaFetch.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect((await viaFetch.json()).type).toMatch(/\/problems\/payload-too-large$/);
    const viaHttp = await postInPieces(`${gateway.url}/v1/sgtm`, headers, huge);
    expect(viaHttp.status).toBe(413);
    expect(Object.keys(JSON.parse(viaHttp.body)).sort()).toEqual(['error', 'message']);

    // Still serving: a small batch of the same workspace is accepted, and it is all that reached events.raw.
    const ok = await fetch(`${gateway.url}/v1/events`, { method: 'POST', headers, body: JSON.stringify([webEvent()]) });
    expect(ok.status).toBe(202);
    const raw = (await kit.read<EventEnvelope>(Topics.eventsRaw, fromRaw)).filter((r) => r.value.workspace_id === ws);
    expect(raw).toHaveLength(1);
    for (const p of [gateway, console_]) expect(await p.stop()).toBe(0);
  });
});

describe('the console on Kafka and Postgres', () => {
  it('signs in, creates a key that the gateway takes, shows it used; other workspaces and forms without a token are refused', async () => {
    const { console_, gateway, admin } = await consoleAndGateway(`${kit.groupPrefix}console-`);
    const ws = (await admin.createWorkspace('console on kafka')).id;
    const other = (await admin.createWorkspace('someone else')).id;
    const owner = { email: 'owner@kafka-console.example', password: 'correct horse battery' };
    expect((await admin.call('POST', `/admin/v1/workspaces/${ws}/members`, { ...owner, role: 'owner' })).status).toBe(201);

    const browser = newBrowser();
    const signInPage = await (await browser.open(`${console_.url}/console`)).text();
    expect((await browser.submit(`${console_.url}/console/sign-in`, { ...owner, _csrf: csrfOf(signInPage) })).status).toBe(200);
    const keysPage = await (await browser.open(`${console_.url}/console/w/${ws}/api-key`)).text();
    const created = await browser.submit(`${console_.url}/console/w/${ws}/api-key`, { name: 'kafka checkout', mode: 'live', _csrf: csrfOf(keysPage) });
    expect(created.status).toBe(200);
    const key = /<output id="new-key"[^>]*>([^<]+)<\/output>/.exec(await created.text())?.[1];
    expect(key).toEqual(expect.any(String));

    const keyRow = async (): Promise<string | undefined> =>
      (await (await browser.open(`${console_.url}/console/w/${ws}/api-key`)).text()).split('<tr').find((r) => r.includes('kafka checkout'));
    expect(await keyRow()).toMatch(/>never</);

    const fromRaw = await kit.ends(Topics.eventsRaw);
    const sent = await fetch(`${gateway.url}/v1/events`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify([webEvent()]),
    });
    expect(sent.status).toBe(202);
    expect((await kit.read<EventEnvelope>(Topics.eventsRaw, fromRaw)).filter((r) => r.value.workspace_id === ws)).toHaveLength(1);
    // The key list: its name, and a last-used time once the gateway recorded the use.
    await waitFor('the key shown as used', async () => /<time datetime=/.test((await keyRow()) ?? ''), 20_000, 250);

    expect((await browser.open(`${console_.url}/console/w/${other}/api-key`)).status).toBe(404);
    const fresh = await (await browser.open(`${console_.url}/console/w/${ws}/api-key`)).text();
    expect((await browser.submit(`${console_.url}/console/w/${ws}/api-key`, { name: 'no token', mode: 'live' })).status).toBe(403);
    expect(fresh).not.toContain('no token');
    for (const p of [gateway, console_]) expect(await p.stop()).toBe(0);
  });
});
