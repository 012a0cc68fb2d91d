/**
 * End to end through the running service (node dist/services/compose/main.js, built first): events posted over HTTP to
 * both endpoints come out of conversions.ready as exactly the expected platform records.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminClient, type AdminClient } from '../helpers/admin-client.js';
import { allGranted, serverEvent, sgtmEvent, sha256, webEvent } from '../helpers/factories.js';
import { readTopic, waitForDrain } from '../helpers/pipeline.js';
import { REPO_ROOT, TEST_ADMIN_TOKEN, startServiceProcess, type ServiceProcess } from '../helpers/service-process.js';

let svc: ServiceProcess;
let admin: AdminClient;
let liveKey: string;
let testKey: string;
let ws: string;

const post = async (path: string, key: string, body: unknown, headers: Record<string, string> = {}) => {
  const r = await fetch(`${svc.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  expect(r.status, await r.clone().text()).toBeLessThan(300);
  return r;
};

beforeAll(async () => {
  if (!existsSync(join(REPO_ROOT, 'dist', 'services', 'compose', 'main.js'))) throw new Error('build first: npx tsc -p tsconfig.dev.json (make test does)');
  svc = await startServiceProcess();
  admin = adminClient(svc.url, TEST_ADMIN_TOKEN);
  ws = (await admin.createWorkspace('e2e-pipeline')).id;
  liveKey = (await admin.createKey(ws, 'live')).key;
  testKey = (await admin.createKey(ws, 'test')).key;
  const setup = await admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, {
    event_source: 'WEB', event_source_id: 'PIXEL123', pii_mode: 'hashed', click_window_days: 7, test_event_code: 'TEST123',
    events: [{ name: 'purchase', platform_event: 'CompletePayment' }, { name: 'sign_up', platform_event: 'CompleteRegistration' }],
  });
  expect(setup.status).toBe(200);
});

afterAll(async () => {
  if (svc?.child.exitCode === null) await svc.kill();
});

describe('HTTP in, conversions.ready out', () => {
  it('produces exactly the expected platform records', async () => {
    const JANE = sha256('jane@example.com');
    const JANE_PHONE = sha256('+4915112345678');
    // 1. A web page view with a click id: not selected, but it feeds the identity graph.
    await post('/v1/events', liveKey, [webEvent({
      event_name: 'page_view',
      event_data: { client_id: 'c-1', session_id: 's-1', page_location: 'https://shop.example/landing?ttclid=CLICK-1', user_agent: 'UA-web' },
      event_metadata: { idempotency_key: 'pv-1', identifiers: { user: 'u-1' } },
    })]);
    // 2. A server purchase of the same user: click id, page and user agent come through the graph.
    await post('/v1/events', liveKey, [serverEvent({
      event_data: { value: 10, currency: 'EUR', transaction_id: 'T-1' },
      event_metadata: { idempotency_key: 'order-1', identifiers: { user: 'u-1', email: undefined } },
    })]);
    // 3. A web purchase with its own click id, then the same key again (dropped by dedupe).
    await post('/v1/events', liveKey, [webEvent({
      event_data: { client_id: 'c-2', session_id: 's-2', page_location: 'https://shop.example/pay?ttclid=CLICK-2', user_agent: 'UA-2' },
      event_metadata: { idempotency_key: 'order-2', identifiers: { user: 'u-2', email: { sha256_email: sha256('bob@example.com') }, phone: undefined } },
    })]);
    await post('/v1/events', liveKey, [webEvent({ event_metadata: { idempotency_key: 'order-2', identifiers: { user: 'someone-else' } } })]);
    // 4. Endpoint B with Idempotency-Key: both events of the first request; a later request with the key: nothing.
    await post('/v1/sgtm', liveKey, [sgtmEvent(), sgtmEvent({ event_name: 'sign_up' })], { 'idempotency-key': 'sgtm-1' });
    await post('/v1/sgtm', liveKey, [sgtmEvent({ event_name: 'sign_up' })], { 'idempotency-key': 'sgtm-1' });
    // 5. Endpoint B without a key, the same payload twice: one conversion (derived event_id).
    const repeated = sgtmEvent({ event_payload: { transaction_id: 'T-B', value: 5, currency: 'USD', page_location: 'https://shop.example/b' } });
    await post('/v1/sgtm', liveKey, [repeated]);
    await post('/v1/sgtm', liveKey, [repeated]);
    // 6. Consent: no ad_storage → not forwarded; no ad_user_data → forwarded without personal data.
    await post('/v1/events', liveKey, [
      webEvent({ event_metadata: { idempotency_key: 'order-3', consent: { ...allGranted(), ad_storage: 'DENIED' } } }),
      webEvent({
        event_data: { client_id: 'c-4', session_id: 's-4', page_location: 'https://shop.example/4', user_agent: 'UA-4' },
        event_metadata: { idempotency_key: 'order-4', consent: { ...allGranted(), ad_user_data: 'UNSPECIFIED' } },
      }),
    ]);
    // 7. A test-mode key: carries the setup's test_event_code.
    await post('/v1/events', testKey, [webEvent({ event_metadata: { idempotency_key: 'order-t1' } })]);

    await waitForDrain(admin);
    expect(await svc.stop()).toBe(0);

    const rows = await readTopic(svc.dataDir, 'conversions.ready');
    const byId = new Map(rows.map((r) => [r.value.event_id as string, r]));
    expect(rows).toHaveLength(byId.size);
    const derived = [...byId.keys()].filter((id) => /^[0-9a-f]{64}$/.test(id));
    expect(derived).toHaveLength(1);
    expect(new Set(byId.keys())).toEqual(new Set(['order-1', 'order-2', 'sgtm-1:0', 'sgtm-1:1', derived[0], 'order-4', 'order-t1']));
    for (const r of rows) expect(r.key).toBe(`${ws}:${r.value.event_id}`);

    const order1 = byId.get('order-1')!.value;
    expect(order1).toMatchObject({
      v: 1, workspace_id: ws, key_mode: 'live', event_id: 'order-1', event_source: 'WEB', event_source_id: 'PIXEL123', test_event_code: null,
    });
    expect(order1.record).toEqual({
      event: 'CompletePayment',
      event_id: 'order-1',
      event_time: Math.floor(order1.received_at / 1000),
      limited_data_use: false,
      page: { url: 'https://shop.example/landing?ttclid=CLICK-1' },
      user: { email: [JANE], external_id: [sha256('u-1')], ttclid: 'CLICK-1', user_agent: 'UA-web', phone: [JANE_PHONE] },
      conversion_date_time: expect.stringMatching(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\+00:00$/),
      transaction_id: 'order-1',
      consent: { ad_user_data: 'GRANTED', ad_personalization: 'GRANTED' },
      properties: { value: 10, currency: 'EUR', order_id: 'T-1' },
    });
    expect(byId.get('order-2')!.value.record.user).toEqual({
      ttclid: 'CLICK-2', user_agent: 'UA-2', external_id: [sha256('u-2')], email: [sha256('bob@example.com')],
    });
    expect(byId.get('sgtm-1:1')!.value.record.event).toBe('CompleteRegistration');
    expect(byId.get('sgtm-1:0')!.value.record).toMatchObject({ limited_data_use: false, consent: { ad_user_data: 'GRANTED', ad_personalization: 'DENIED' } });
    const order4 = byId.get('order-4')!.value.record;
    expect(order4).toMatchObject({ limited_data_use: true, consent: { ad_user_data: 'UNSPECIFIED' }, page: { url: 'https://shop.example/4' } });
    expect(order4.user.email ?? order4.user.external_id ?? order4.user.phone).toBeUndefined();
    expect(byId.get('order-t1')!.value).toMatchObject({ key_mode: 'test', test_event_code: 'TEST123' });
    for (const r of rows) if (r.value.key_mode === 'live') expect(r.value.test_event_code).toBeNull();
  });
});
