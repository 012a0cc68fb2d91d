/**
 * Event time end to end: the SDK (endpoint A) and the tag (endpoint B) send yesterday's purchases with their own
 * time, through the real service process, to the platform sandbox, whose received records carry that time as
 * event_time and as conversion_date_time in the ad account's time zone. A purchase without a time keeps today's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, receivedBySandbox, sandboxControl, SANDBOX_APP } from '../../../test/helpers/forwarder-rig.js';
import { startSandbox, type RunningSandbox } from '../../../test/sandbox/server.js';
import { newBrowser } from '../../../test/helpers/browser.js';
import { adminClient } from '../../../test/helpers/admin-client.js';
import { TEST_ADMIN_TOKEN, startServiceProcess, type ServiceProcess } from '../../../test/helpers/service-process.js';
import { runTemplate } from '../../sgtm/test/harness.js';
import { createClient, hashedIdentifiers } from '../src/index.js';

const TIME_ZONE = 'Asia/Tokyo';
let sandbox: RunningSandbox;
let svc: ServiceProcess;
let key: string;

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0 });
  await sandboxControl(sandbox, '/settings', { timezone: TIME_ZONE });
  svc = await startServiceProcess({
    env: {
      CREDENTIALS_KEY: Buffer.alloc(32, 9).toString('base64'),
      PLATFORM_API_BASE: sandbox.apiBase,
      PLATFORM_AUTH_URL: sandbox.authUrl,
      PLATFORM_APP_ID: SANDBOX_APP.id,
      PLATFORM_APP_SECRET: SANDBOX_APP.secret,
      FORWARDER_LINGER_MS: '20',
    },
  });
  const admin = adminClient(svc.url, TEST_ADMIN_TOKEN);
  const ws = (await admin.createWorkspace('event-time')).id;
  key = (await admin.createKey(ws, 'live')).key;
  const started = await admin.call('POST', `/admin/v1/workspaces/${ws}/connection`);
  // A browser: the connect link binds the flow with a cookie, which the callback needs.
  expect((await newBrowser().open(started.body.authorize_url)).status).toBe(200);
  const setup = await admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, {
    event_source: 'WEB', event_source_id: 'PIXEL123', pii_mode: 'hashed', click_window_days: 7,
    events: [{ name: 'purchase', platform_event: 'CompletePayment' }],
  });
  expect(setup.status).toBe(200);
}, 120_000);
afterAll(async () => {
  if (svc?.child.exitCode === null) await svc.kill();
  await sandbox?.close();
});

/** `YYYY-MM-DD HH:mm:ss` of an instant in the account's time zone (the service appends the offset). */
function localTime(ms: number): string {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-CA', { timeZone: TIME_ZONE, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit' })
      .formatToParts(ms)
      .map((p) => [p.type, p.value]),
  );
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second}`;
}

describe('event time reaches the platform', () => {
  it('from the SDK and from the tag, as event_time and conversion_date_time; without it, the receive time', async () => {
    const yesterday = Math.floor((Date.now() - 26 * 3600_000) / 1000) * 1000;
    const lastWeek = Math.floor((Date.now() - 6 * 24 * 3600_000) / 1000) * 1000;
    const page = { client_id: 'c-1', session_id: 's-1', page_location: 'https://shop.example/thanks?ttclid=CLICK-1', user_agent: 'UA' };
    const consent = { analytics_storage: 'GRANTED', ad_storage: 'GRANTED', ad_user_data: 'GRANTED', ad_personalization: 'DENIED' } as const;

    const client = createClient({ baseUrl: svc.url, apiKey: key });
    const before = Date.now();
    client.track({
      event_name: 'purchase', event_source: 'WEB', event_data: page, event_time: new Date(yesterday),
      event_metadata: { idempotency_key: 'sdk-yesterday', identifiers: hashedIdentifiers({ email: 'jane@example.com' }), consent },
    });
    client.track({
      event_name: 'purchase', event_source: 'WEB', event_data: page,
      event_metadata: { idempotency_key: 'sdk-now', identifiers: {}, consent },
    });
    await client.shutdown();

    const tag = await runTemplate({
      data: { endpointUrl: svc.url, apiKey: key },
      eventData: { event_name: 'purchase', event_id: 'tag-last-week', event_time: lastWeek, 'x-ga-gcd': '13t3t3t3p5', client_id: 'c-2', ...page },
    });
    expect(tag.outcome).toBe('success');

    const got = await eventually(
      'three conversions at the platform',
      async () => {
        const r = await receivedBySandbox(sandbox);
        return r.length >= 3 ? new Map(r.map((e) => [e.event_id, e.record])) : false;
      },
      60_000,
    );
    expect(got.get('sdk-yesterday')).toMatchObject({ event_time: yesterday / 1000 });
    expect(got.get('sdk-yesterday').conversion_date_time).toBe(`${localTime(yesterday)}+09:00`);
    expect(got.get('tag-last-week')).toMatchObject({ event_time: lastWeek / 1000 });
    expect(got.get('tag-last-week').conversion_date_time).toBe(`${localTime(lastWeek)}+09:00`);
    // Without an event time: when the service received it.
    expect(got.get('sdk-now').event_time).toBeGreaterThanOrEqual(Math.floor(before / 1000));
    expect(got.get('sdk-now').event_time).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));
  }, 120_000);
});
