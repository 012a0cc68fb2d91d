/**
 * The console on the Kafka runtime (issue 11 builds and tests it on the embedded default): a console process and a
 * gateway replica on the real broker and Postgres. A member of the workspace signs in, creates a named key through
 * the API Key page, the gateway takes an event with it, and the page then shows the key as used; a workspace the
 * user does not belong to answers 404 by URL, and a form without its CSRF token is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventEnvelope } from '../../services/shared/envelope.js';
import { Topics } from '../../services/shared/topics.js';
import { adminClient } from '../helpers/admin-client.js';
import { newBrowser } from '../helpers/browser.js';
import { webEvent } from '../helpers/factories.js';
import { freshDatabase, infraEnv, kafkaKit, waitFor, type KafkaKit } from '../helpers/infra.js';
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

const csrfOf = (html: string): string => /name="_csrf" value="([^"]+)"/.exec(html)![1]!;

describe('the console on Kafka and Postgres', () => {
  it('signs in, creates a key that the gateway takes, shows it used; other workspaces and forms without a token are refused', async () => {
    const prefix = `${kit.groupPrefix}console-`;
    const start = (role: string) => startKafkaService(infraEnv(), { databaseUrl: database.url, groupPrefix: prefix, role });
    const [console_, gateway] = await Promise.all([start('console'), start('gateway')]);
    const admin = adminClient(console_.url, TEST_ADMIN_TOKEN);
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
