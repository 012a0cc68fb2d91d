/**
 * The console's Destinations pages on the Kafka runtime (shared broker and registry, a Postgres database of this
 * file's own, its own group prefix): an owner adds a Meta destination through the console's form (Meta's
 * variables unset: the page says so, the setup is kept), a purchase goes through the Kafka pipeline to the TikTok
 * sandbox, and the list and the TikTok destination's page show that delivery.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csrfOf, newBrowser, type Browser } from '../helpers/browser.js';
import { webEvent } from '../helpers/factories.js';
import { receivedBySandbox } from '../helpers/forwarder-rig.js';
import { freshDatabase, infraEnv, kafkaKit, waitFor, type KafkaKit } from '../helpers/infra.js';
import { startServiceWithSandbox, type ServiceWithSandbox } from '../helpers/service-with-sandbox.js';

const ADMIN = 'kafka-console-destinations-admin-token';
const OWNER = { email: 'owner@kafka-dest.example', password: 'kafka owner password' };
let kit: KafkaKit;
let database: Awaited<ReturnType<typeof freshDatabase>>;
let svc: ServiceWithSandbox;
let owner: Browser;

beforeAll(async () => {
  kit = await kafkaKit(infraEnv());
  database = await freshDatabase(infraEnv().DATABASE_URL);
  const prefix = `${kit.groupPrefix}cd-`;
  await kit.startStagesAtEnd(prefix);
  svc = await startServiceWithSandbox(ADMIN, {
    KAFKA_BROKERS: infraEnv().KAFKA_BROKERS,
    SCHEMA_REGISTRY_URL: infraEnv().SCHEMA_REGISTRY_URL,
    DATABASE_URL: database.url,
    KAFKA_GROUP_PREFIX: prefix,
    FORWARDER_LINGER_MS: '50',
  });
}, 120_000);
afterAll(async () => {
  await svc?.close();
  await kit?.close();
  await database?.drop();
});

describe('the console\'s Destinations on Kafka', () => {
  it('adds a Meta destination from the form, and shows a purchase delivered to TikTok on the list and on its page', async () => {
    const { ws, key } = await svc.connectedWorkspace('kafka-console-dest');
    expect((await svc.admin.call('POST', `/admin/v1/workspaces/${ws}/members`, { ...OWNER, role: 'owner' })).status).toBe(201);
    owner = newBrowser();
    const signIn = await (await owner.open(`${svc.url}/console`)).text();
    expect((await owner.submit(`${svc.url}/console/sign-in`, { ...OWNER, _csrf: csrfOf(signIn) })).status).toBe(200);

    const form = await (await owner.open(`${svc.url}/console/w/${ws}/destinations/new?kind=meta`)).text();
    expect(form).toContain('The Meta app is not configured: set META_APP_ID and META_APP_SECRET.');
    const added = await owner.submit(`${svc.url}/console/w/${ws}/destinations`, {
      _csrf: csrfOf(form), kind: 'meta', dest_name: 'Meta pixel', pixel_id: '4444', action_source: 'website', pii_mode: 'hashed', test_event_code: '', extra_name: 'purchase', extra_to: 'Purchase',
    });
    expect(added.status).toBe(200);
    expect(added.finalUrl).toMatch(/\/destinations\/dst_/);
    expect(await added.text()).toContain('Destination &quot;Meta pixel&quot; added.');

    const event = webEvent();
    await svc.send(key, [event]);
    await waitFor('TikTok received the purchase', async () => (await receivedBySandbox(svc.sandbox)).some((e) => e.event_id === event.event_metadata.idempotency_key), 60_000);
    const list = await waitFor('the list shows the delivery', async () => {
      const html = await (await owner.open(`${svc.url}/console/w/${ws}/destinations`)).text();
      return /\(sent\)<\/td>\s*<td class="num">1<\/td>/.test(html) ? html : undefined;
    }, 30_000);
    expect(list).toContain('>Meta pixel</a>');
    expect(list).toContain('none in 7 days');
    const page = await (await owner.open(`${svc.url}/console/w/${ws}/destinations/tiktok`)).text();
    expect(page).toContain(event.event_metadata.idempotency_key);
  }, 120_000);
});
