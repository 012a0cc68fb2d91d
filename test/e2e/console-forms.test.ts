/**
 * The console's form posts (urlencoded, parsed by @fastify/formbody) against the whole service: a value the store
 * cannot hold (U+0000) is refused with 400 and a message on the page before anything is stored, on every POST
 * route (and in a GET form's query), as JSON bodies are by the root parser (services/gateway/validation/json-body.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csrfOf, newBrowser, type Browser } from '../helpers/browser.js';
import { startServiceWithSandbox, type ServiceWithSandbox } from '../helpers/service-with-sandbox.js';

const ADMIN = 'console-forms-admin-token';
const OWNER = { email: 'owner@forms.example', password: 'correct horse battery' };
let running: ServiceWithSandbox;
let url: string;
let ws: string;
let owner: Browser;


beforeAll(async () => {
  running = await startServiceWithSandbox(ADMIN);
  url = running.url;
  ws = (await running.admin.createWorkspace('Forms shop')).id;
  expect((await running.admin.call('POST', `/admin/v1/workspaces/${ws}/members`, { ...OWNER, role: 'owner' })).status).toBe(201);
  owner = newBrowser();
  const page = await (await owner.open(`${url}/console`)).text();
  expect((await owner.submit(`${url}/console/sign-in`, { ...OWNER, _csrf: csrfOf(page) })).status).toBe(200);
});
afterAll(() => running?.close());

/** What the store holds of what these forms could create or change. */
async function stored(): Promise<string> {
  const workspaces = await running.admin.call('GET', '/admin/v1/workspaces?limit=100');
  const keys = await running.admin.call('GET', `/admin/v1/workspaces/${ws}/api-keys`);
  const forwarding = await running.admin.call('GET', `/admin/v1/workspaces/${ws}/forwarding`);
  const destinations = await running.admin.call('GET', `/admin/v1/workspaces/${ws}/destinations`);
  return JSON.stringify([workspaces.body, keys.body, forwarding.status === 200 ? forwarding.body : forwarding.status, destinations.body]);
}

describe('console form values the store cannot hold', () => {
  const forwarding = { event_source: 'WEB', event_source_id: 'PIXEL1', pii_mode: 'hashed', click_window_days: '7', extra_name: 'purchase', extra_to: 'Purchase' };
  it.each([
    { what: 'a workspace name with U+0000', page: '/console/workspaces', post: '/console/workspaces', fields: { name: 'shop\u0000' }, field: 'name' },
    { what: 'an API key name with U+0000', page: '/console/w/WS/api-key', post: '/console/w/WS/api-key', fields: { name: 'web\u0000tag', mode: 'live' }, field: 'name' },
    { what: 'a field name with U+0000', page: '/console/w/WS/api-key', post: '/console/w/WS/api-key', fields: { 'na\u0000me': 'x', name: 'ok', mode: 'live' }, field: 'na\u0000me' },
    { what: 'a pixel id with U+0000', page: '/console/w/WS/forwarding', post: '/console/w/WS/forwarding', fields: { ...forwarding, event_source_id: 'PIX\u0000' }, field: 'event_source_id' },
    {
      what: 'a destination name with U+0000',
      page: '/console/w/WS/destinations/new?kind=meta',
      post: '/console/w/WS/destinations',
      fields: { kind: 'meta', dest_name: 'Meta\u0000', pixel_id: '1', action_source: 'website', pii_mode: 'hashed', extra_name: 'purchase', extra_to: 'Purchase' },
      field: 'dest_name',
    },
    { what: 'an event name with U+0000', page: '/console/w/WS/forwarding', post: '/console/w/WS/forwarding', fields: { ...forwarding, extra_name: 'pur\u0000chase' }, field: 'extra_name' },
  ])('$what: 400 with a message, nothing stored', async ({ page, post, fields }) => {
    const before = await stored();
    const form = await (await owner.open(`${url}${page.replace('WS', ws)}`)).text();
    const r = await owner.submit(`${url}${post.replace('WS', ws)}`, { ...fields, _csrf: csrfOf(form) });
    const html = await r.text();
    expect(r.status, html).toBe(400);
    expect(html).toContain('The form is not valid');
    expect(html).toContain('cannot contain U+0000');
    expect(await stored()).toBe(before);
  });

  it('sign-in with U+0000 in the email: 400, not a server error', async () => {
    const browser = newBrowser();
    const form = await (await browser.open(`${url}/console`)).text();
    const r = await browser.submit(`${url}/console/sign-in`, { email: 'owner\u0000@forms.example', password: OWNER.password, _csrf: csrfOf(form) });
    expect(r.status).toBe(400);
    expect(await r.text()).toContain('cannot contain U+0000');
  });

  it('a GET form (Activity, "Why this field") with U+0000 in the event id: 400, not a server error', async () => {
    const r = await owner.open(`${url}/console/w/${ws}/activity?event_id=${encodeURIComponent('evt\u0000')}`);
    expect(r.status).toBe(400);
    expect(await r.text()).toContain('event_id&quot; holds U+0000');
  });

  it('the same forms with plain values are accepted', async () => {
    const form = await (await owner.open(`${url}/console/w/${ws}/api-key`)).text();
    const r = await owner.submit(`${url}/console/w/${ws}/api-key`, { name: 'web tag ✓ 😀', mode: 'live', _csrf: csrfOf(form) });
    expect(r.status).toBe(200);
    expect(await r.text()).toContain('web tag ✓ 😀');
  });
});
