/**
 * The console's Destinations pages, in-process (app.inject) against the real routes and store: the list, adding a
 * Meta destination with its problems shown next to their fields (the admin API's checks), editing, connecting
 * (a kind whose variables are unset says so; a configured one goes to the destination start link), disconnecting
 * and removing after a confirmation, the destination's own deliveries, TikTok's first destination, and the access
 * rules (members read-only, other workspaces 404, CSRF).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN, buildTestApp, type TestApp } from '../../../test/helpers/in-process.js';
import { SETUP } from '../../../test/helpers/workspaces.js';

let t: TestApp;
let ws: string;
let other: string;
const OWNER = { email: 'owner@dest.example', password: 'owner passphrase 1' };
const MEMBER = { email: 'member@dest.example', password: 'member passphrase 1' };
const STRANGER = { email: 'owner@elsewhere.example', password: 'stranger passphrase 1' };

/** A browser over app.inject: a cookie jar, no redirects followed. */
function browser() {
  const jar = new Map<string, string>();
  const send = async (method: 'GET' | 'POST', url: string, form?: Record<string, string>) => {
    const r = await t.app.inject({
      method,
      url,
      headers: {
        ...(jar.size ? { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') } : {}),
        ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
      ...(form ? { payload: new URLSearchParams(form).toString() } : {}),
    });
    for (const c of r.cookies as Array<{ name: string; value: string }>) jar.set(c.name, c.value);
    return r;
  };
  const csrf = async (page: string) => /name="_csrf" value="([^"]+)"/.exec((await send('GET', page)).body)![1]!;
  return {
    send,
    /** Posts a form with the CSRF token of `page`. */
    post: async (url: string, form: Record<string, string>, page = '/console/workspaces') => send('POST', url, { ...form, _csrf: await csrf(page) }),
    signIn: async (who: { email: string; password: string }) => {
      const r = await send('POST', '/console/sign-in', { ...who, _csrf: await csrf('/console') });
      expect(r.statusCode).toBe(303);
    },
  };
}

const admin = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: unknown) =>
  t.app.inject({ method, url, headers: { authorization: `Bearer ${ADMIN}` }, ...(payload === undefined ? {} : { payload: payload as object }) });

const META_FORM = {
  kind: 'meta',
  dest_name: 'Meta: main pixel',
  pixel_id: '123456789',
  action_source: 'website',
  pii_mode: 'hashed',
  test_event_code: '',
  extra_name: 'purchase',
  extra_to: 'Purchase',
};

let owner: ReturnType<typeof browser>;

beforeAll(async () => {
  // Google's variables set, Meta's not: one kind connects, the other says why it cannot.
  t = await buildTestApp({ GOOGLE_CLIENT_ID: 'console-test-client', GOOGLE_CLIENT_SECRET: 'console-test-secret' }, { console: true });
  ws = (await admin('POST', '/admin/v1/workspaces', { name: 'Dest shop' })).json().id;
  other = (await admin('POST', '/admin/v1/workspaces', { name: 'Elsewhere' })).json().id;
  expect((await admin('POST', `/admin/v1/workspaces/${ws}/members`, { ...OWNER, role: 'owner' })).statusCode).toBe(201);
  expect((await admin('POST', `/admin/v1/workspaces/${ws}/members`, { ...MEMBER, role: 'member' })).statusCode).toBe(201);
  expect((await admin('POST', `/admin/v1/workspaces/${other}/members`, { ...STRANGER, role: 'owner' })).statusCode).toBe(201);
  owner = browser();
  await owner.signIn(OWNER);
});
afterAll(async () => t?.close());

describe('the Destinations pages', () => {
  let metaId: string;

  it('lists nothing at first, and offers to add one', async () => {
    const r = await owner.send('GET', `/console/w/${ws}/destinations`);
    expect(r.statusCode).toBe(200);
    expect(r.body).toContain('No destinations yet.');
    expect(r.body).toContain('Add a destination');
    expect(r.body).toMatch(/aria-current="page"[^>]*>Destinations</);
  });

  it('says on the kind choice, and on the Meta form, that Meta cannot be connected until its variables are set', async () => {
    const choice = await owner.send('GET', `/console/w/${ws}/destinations/new`);
    expect(choice.body).toContain('The Meta app is not configured: set META_APP_ID and META_APP_SECRET.');
    expect(choice.body).not.toContain('The Google app is not configured');
    const form = await owner.send('GET', `/console/w/${ws}/destinations/new?kind=meta`);
    expect(form.statusCode).toBe(200);
    expect(form.body).toContain('Connecting is not available yet. The Meta app is not configured: set META_APP_ID and META_APP_SECRET.');
  });

  it('shows each problem next to its field, with the admin API\'s own messages, and keeps what was typed', async () => {
    const r = await owner.post(`/console/w/${ws}/destinations`, { ...META_FORM, pixel_id: 'px-12', dest_name: '  ' });
    expect(r.statusCode).toBe(400);
    expect(r.body).toContain('The setup was not saved');
    expect(r.body).toMatch(/id="dest_name"[^>]*aria-invalid="true"/);
    expect(r.body).toContain('id="err-name"');
    // The schema's check runs once the form's own are met: then the pixel's message, next to the pixel.
    const pixel = await owner.post(`/console/w/${ws}/destinations`, { ...META_FORM, pixel_id: 'px-12' });
    expect(pixel.statusCode).toBe(400);
    expect(pixel.body).toMatch(/id="pixel_id"[^>]*value="px-12"[^>]*aria-invalid="true"/);
    expect(pixel.body).toMatch(/<p class="field-error" id="err-pixel_id">Must be the pixel \(dataset\) id: digits only.<\/p>/);
    // The API says the same of the same setup.
    const api = await admin('POST', `/admin/v1/workspaces/${ws}/destinations`, {
      kind: 'meta', name: 'x', setup: { pixel_id: 'px-12', action_source: 'website', pii_mode: 'hashed', events: [{ name: 'purchase', platform_event: 'Purchase' }] },
    });
    expect(api.statusCode).toBe(422);
    expect(api.json().detail ?? api.body).toContain('must be the pixel (dataset) id: digits only');
    // A ticked event without its platform event: said next to that event.
    const event = await owner.post(`/console/w/${ws}/destinations`, { ...META_FORM, extra_to: '' });
    expect(event.statusCode).toBe(400);
    expect(event.body).toContain('Choose the platform event for &quot;purchase&quot;.');
    expect((await admin('GET', `/admin/v1/workspaces/${ws}/destinations`)).json().items).toEqual([]);
  });

  it('adds a Meta destination, lists it, and saves a changed setup', async () => {
    const r = await owner.post(`/console/w/${ws}/destinations`, META_FORM);
    expect(r.statusCode, r.body).toBe(303);
    metaId = /\/destinations\/(dst_[^/?#]+)$/.exec(String(r.headers.location))![1]!;
    const page = await owner.send('GET', String(r.headers.location));
    expect(page.body).toContain('Destination &quot;Meta: main pixel&quot; added.');
    const [d] = (await admin('GET', `/admin/v1/workspaces/${ws}/destinations`)).json().items;
    expect(d).toMatchObject({ id: metaId, kind: 'meta', name: 'Meta: main pixel', status: 'disconnected', setup: { pixel_id: '123456789', events: [{ name: 'purchase', platform_event: 'Purchase' }] } });
    expect(d.setup).not.toHaveProperty('test_event_code');

    const list = await owner.send('GET', `/console/w/${ws}/destinations`);
    expect(list.body).toContain(`href="/console/w/${ws}/destinations/${metaId}">Meta: main pixel</a>`);
    expect(list.body).toContain('<span class="badge disconnected">disconnected</span>');

    // The saved event is a row of the form now: edited there.
    const form = await owner.send('GET', `/console/w/${ws}/destinations/${metaId}`);
    expect(form.body).toMatch(/name="name_0" value="purchase"/);
    const saved = await owner.post(
      `/console/w/${ws}/destinations/${metaId}`,
      { dest_name: 'Meta: shop pixel', pixel_id: '123456789', action_source: 'website', pii_mode: 'none', test_event_code: 'TEST77', name_0: 'purchase', on_0: '1', to_0: 'Purchase', extra_name: 'sign_up', extra_to: 'CompleteRegistration' },
    );
    expect(saved.statusCode, saved.body).toBe(303);
    expect((await admin('GET', `/admin/v1/workspaces/${ws}/destinations/${metaId}`)).json()).toMatchObject({
      name: 'Meta: shop pixel',
      setup: { pii_mode: 'none', test_event_code: 'TEST77', events: [{ name: 'purchase', platform_event: 'Purchase' }, { name: 'sign_up', platform_event: 'CompleteRegistration' }] },
    });
    const audit = await t.db.query<{ actor: string; action: string }>("SELECT actor, action FROM audit_log WHERE workspace_id = $1 AND action LIKE 'destination.%' ORDER BY id", [ws]);
    expect(audit.rows).toEqual([
      { actor: `console:${OWNER.email}`, action: 'destination.created' },
      { actor: `console:${OWNER.email}`, action: 'destination.updated' },
    ]);
  });

  it('connecting an unconfigured kind says why, with the API\'s message; a configured kind goes to the destination start link', async () => {
    const page = await owner.send('GET', `/console/w/${ws}/destinations/${metaId}`);
    expect(page.body).toContain('Connecting is not available: The Meta app is not configured');
    expect(page.body).not.toContain('>Connect Meta<');
    const refused = await owner.post(`/console/w/${ws}/destinations/${metaId}/connect`, {}, `/console/w/${ws}/destinations/${metaId}`);
    expect(refused.statusCode).toBe(503);
    expect(refused.body).toContain('The Meta app is not configured: set META_APP_ID and META_APP_SECRET.');

    const g = await owner.post(`/console/w/${ws}/destinations`, {
      kind: 'google', dest_name: 'Google Ads', customer_id: '1234567890', login_customer_id: '', conversion_action_id: '42', pii_mode: 'hashed', test_event_code: '', extra_name: 'purchase', extra_to: 'purchase',
    });
    expect(g.statusCode, g.body).toBe(303);
    const googleId = /(dst_[^/?#]+)$/.exec(String(g.headers.location))![1]!;
    const gPage = await owner.send('GET', `/console/w/${ws}/destinations/${googleId}`);
    expect(gPage.body).toContain('>Connect Google Ads</button>');
    const started = await owner.post(`/console/w/${ws}/destinations/${googleId}/connect`, {}, `/console/w/${ws}/destinations/${googleId}`);
    expect(started.statusCode).toBe(303);
    expect(String(started.headers.location)).toMatch(/^http:\/\/ingest\.test\/oauth\/destination\/start\?state=/);
    // The CSP lets the Connect form's redirect go on to Meta's and Google's dialogs.
    expect(String(started.headers['content-security-policy'])).toMatch(/form-action 'self' \S+ https:\/\/www\.facebook\.com https:\/\/accounts\.google\.com/);
  });

  it('shows only this destination\'s deliveries on its page', async () => {
    await t.db.query(
      `INSERT INTO deliveries (workspace_id, destination_id, kind, event_id, outcome, attempts, record, match_keys, match_quality)
       VALUES ($1, $2, 'meta', 'order-meta-1', 'refused', 1, '{}'::jsonb, '["email"]'::jsonb, 3), ($1, 'tiktok', 'tiktok', 'order-tiktok-1', 'sent', 1, '{}'::jsonb, '[]'::jsonb, 0)`,
      [ws, metaId],
    );
    const page = await owner.send('GET', `/console/w/${ws}/destinations/${metaId}`);
    expect(page.body).toContain('order-meta-1');
    expect(page.body).not.toContain('order-tiktok-1');
    // Its outcome filter works as Activity's; the destination stays this one.
    const filtered = await owner.send('GET', `/console/w/${ws}/destinations/${metaId}?d_outcome=sent&d_destination=tiktok`);
    expect(filtered.body).not.toContain('order-meta-1');
    expect(filtered.body).not.toContain('order-tiktok-1');
    const list = await owner.send('GET', `/console/w/${ws}/destinations`);
    const row = new RegExp(`${metaId}">Meta: shop pixel</a>[\\s\\S]*?\\(refused\\)</td>\\s*<td class="num">0</td><td class="num">1</td>`);
    expect(list.body).toMatch(row);
  });

  it('a member sees a destination read-only and cannot change it', async () => {
    const member = browser();
    await member.signIn(MEMBER);
    const page = await member.send('GET', `/console/w/${ws}/destinations/${metaId}`);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('you see the setup read-only');
    expect(page.body).not.toContain('Save setup');
    const r = await member.post(`/console/w/${ws}/destinations/${metaId}`, { ...META_FORM }, `/console/w/${ws}/destinations`);
    expect(r.statusCode).toBe(403);
    expect((await member.send('GET', `/console/w/${ws}/destinations/new?kind=meta`)).statusCode).toBe(403);
  });

  it('another workspace\'s owner gets 404, and a post without its CSRF token is refused', async () => {
    const stranger = browser();
    await stranger.signIn(STRANGER);
    expect((await stranger.send('GET', `/console/w/${ws}/destinations`)).statusCode).toBe(404);
    expect((await stranger.send('GET', `/console/w/${ws}/destinations/${metaId}`)).statusCode).toBe(404);
    // Its own workspace, the other's destination id: not found either.
    expect((await stranger.send('GET', `/console/w/${other}/destinations/${metaId}`)).statusCode).toBe(404);
    const forged = await owner.send('POST', `/console/w/${ws}/destinations/${metaId}/remove`, {});
    expect(forged.statusCode).toBe(403);
    expect((await admin('GET', `/admin/v1/workspaces/${ws}/destinations/${metaId}`)).statusCode).toBe(200);
  });

  it('removes a destination after a confirmation', async () => {
    const confirm = await owner.send('GET', `/console/w/${ws}/destinations/${metaId}/remove`);
    expect(confirm.body).toContain('This cannot be undone.');
    const r = await owner.post(`/console/w/${ws}/destinations/${metaId}/remove`, {}, `/console/w/${ws}/destinations/${metaId}/remove`);
    expect(r.statusCode).toBe(303);
    expect(r.headers.location).toBe(`/console/w/${ws}/destinations`);
    expect((await admin('GET', `/admin/v1/workspaces/${ws}/destinations/${metaId}`)).statusCode).toBe(404);
    expect((await owner.send('GET', `/console/w/${ws}/destinations`)).body).toContain('Destination &quot;Meta: shop pixel&quot; removed.');
  });

  it('TikTok: set up on Forwarding while there is none; then its page shows the setup, the connection and its deliveries', async () => {
    const first = await owner.send('GET', `/console/w/${ws}/destinations/new?kind=tiktok`);
    expect(first.headers.location).toBe(`/console/w/${ws}/forwarding`);
    // The admin API's way of creating the first TikTok destination: the workspace's forwarding setup.
    expect((await admin('POST', `/admin/v1/workspaces/${ws}/destinations`, { kind: 'tiktok', name: 'TikTok', setup: SETUP })).statusCode).toBe(201);
    const page = await owner.send('GET', `/console/w/${ws}/destinations/tiktok`);
    expect(page.body).toContain('Connect ad account');
    expect(page.body).toContain('order-tiktok-1');
    expect(page.body).not.toContain('order-meta-1');
    const list = await owner.send('GET', `/console/w/${ws}/destinations`);
    expect(list.body).toContain(`href="/console/w/${ws}/destinations/tiktok">TikTok</a>`);
  });

  it('TikTok: with the first one set up, a second (another advertiser) is a destination of its own, added from its form', async () => {
    const form = await owner.send('GET', `/console/w/${ws}/destinations/new?kind=tiktok`);
    expect(form.statusCode).toBe(200);
    expect(form.body).toContain('name="event_source_id"');
    const bad = await owner.post(`/console/w/${ws}/destinations`, { kind: 'tiktok', dest_name: 'TikTok: second advertiser', event_source: 'WEB', event_source_id: '', pii_mode: 'hashed', click_window_days: '7', extra_name: 'purchase', extra_to: 'CompletePayment' });
    expect(bad.statusCode).toBe(400);
    expect(bad.body).toContain('event_source_id');
    const r = await owner.post(`/console/w/${ws}/destinations`, { kind: 'tiktok', dest_name: 'TikTok: second advertiser', event_source: 'WEB', event_source_id: 'PIXEL2', pii_mode: 'hashed', click_window_days: '7', extra_name: 'purchase', extra_to: 'CompletePayment' });
    expect(r.statusCode, r.body).toBe(303);
    const id = /\/destinations\/(dst_[^/?#]+)$/.exec(String(r.headers.location))![1]!;
    expect((await admin('GET', `/admin/v1/workspaces/${ws}/destinations/${id}`)).json()).toMatchObject({
      kind: 'tiktok',
      name: 'TikTok: second advertiser',
      setup: { event_source: 'WEB', event_source_id: 'PIXEL2', events: [{ name: 'purchase', platform_event: 'CompletePayment' }] },
    });
    const list = await owner.send('GET', `/console/w/${ws}/destinations`);
    expect(list.body).toContain(`href="/console/w/${ws}/destinations/${id}">TikTok: second advertiser</a>`);
  });
});
