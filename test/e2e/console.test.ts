/**
 * The workspace settings console in real Chromium, against the whole service (embedded runtime, in this process,
 * listening on loopback) and the platform sandbox: sign in, create a key and send with it, pick and map events,
 * connect through the sandbox's authorize page, see the delivered conversion in Activity, disconnect; plus
 * isolation between workspaces, CSRF, the sign-in rate limit, and axe-core on every page.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, receivedBySandbox, sandboxControl, sandboxPlatformEnv } from '../helpers/forwarder-rig.js';
import { startSandbox, type RunningSandbox } from '../sandbox/server.js';
import { startService, type RunningService } from '../../services/compose/service.js';
import { loadConfig } from '../../services/shared/config.js';
import { silentLogger } from '../../services/shared/logger.js';
import { adminClient, type AdminClient } from '../helpers/admin-client.js';
import { webEvent } from '../helpers/factories.js';
import { freePort } from '../sandbox/ports.js';
import { openBrowser, screenshot, seriousViolations, type Browser } from './console-browser.js';

const ADMIN = 'console-e2e-admin-token';
const OWNER = { email: 'owner@acme.example', password: 'acme owner password' };
const OTHER = { email: 'owner@globex.example', password: 'globex owner password' };
const MEMBER = { email: 'analyst@acme.example', password: 'acme member password' };
let sandbox: RunningSandbox;
let service: RunningService;
let url: string;
let admin: AdminClient;
let browser: Browser;
let page: Page;
let ws1: string;
let ws2: string;

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0 });
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  const config = loadConfig({
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: mkdtempSync(join(tmpdir(), 'console-e2e-')),
    ADMIN_TOKEN: ADMIN,
    PUBLIC_BASE_URL: url,
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
    ...sandboxPlatformEnv(sandbox),
    FORWARDER_LINGER_MS: '30',
    LOG_LEVEL: 'silent',
  });
  service = await startService(config, silentLogger, { inMemoryDb: true });
  await service.app.listen({ port, host: '127.0.0.1' });
  admin = adminClient(url, ADMIN);
  ws1 = (await admin.createWorkspace('Acme shop', 'enterprise')).id;
  ws2 = (await admin.createWorkspace('Globex', 'enterprise')).id;
  expect((await admin.call('POST', `/admin/v1/workspaces/${ws1}/members`, { ...OWNER, role: 'owner' })).status).toBe(201);
  expect((await admin.call('POST', `/admin/v1/workspaces/${ws2}/members`, { ...OTHER, role: 'owner' })).status).toBe(201);
  expect((await admin.call('POST', `/admin/v1/workspaces/${ws1}/members`, { ...MEMBER, role: 'member' })).status).toBe(201);
  browser = await openBrowser();
  page = browser.page;
});
afterAll(async () => {
  await browser?.close();
  await service?.close();
  await sandbox?.close();
});

/** Every page the test visits passes axe-core without serious or critical violations. */
async function accessible(name: string): Promise<void> {
  expect(await seriousViolations(page), `axe on ${name}`).toEqual([]);
  await screenshot(page, name);
}

async function send(key: string, eventName: string): Promise<void> {
  const r = await fetch(`${url}/v1/events`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify([webEvent({ event_name: eventName })]),
  });
  expect(r.status, await r.text()).toBe(202);
}

describe('the console in Chromium', () => {
  let key: string;

  it('signs in with the labelled Email and Password inputs and the Sign in button', async () => {
    await page.goto(`${url}/console`);
    await accessible('sign-in');
    const headers = (await page.request.get(`${url}/console`)).headers();
    expect(headers['content-security-policy']).toContain("default-src 'none'");
    expect(headers['content-security-policy']).toContain("script-src 'self'");
    await page.getByLabel('Email').fill(OWNER.email);
    await page.getByLabel('Password').fill('not the password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('do not match');
    await page.getByLabel('Password').fill(OWNER.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Your workspaces' }).waitFor();
    const cookie = (await browser.context.cookies()).find((c) => c.name === 'console_session')!;
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/console' });
    expect(await page.getByRole('link', { name: 'Globex' }).count()).toBe(0);
    await accessible('workspaces');
  });

  it('sends the security headers on every console page, signed in or not, errors too', async () => {
    for (const path of ['/console', '/console/workspaces', `/console/w/${ws1}/api-key`, `/console/w/${ws1}/activity`, '/console/no-such-page']) {
      const r = await page.request.get(`${url}${path}`);
      const headers = r.headers();
      expect(headers['content-type'], path).toContain('text/html');
      expect(headers['content-security-policy'], path).toContain("frame-ancestors 'none'");
      expect(headers['content-security-policy'], path).toContain("default-src 'none'");
      expect(headers['x-frame-options'], path).toBe('DENY');
      expect(headers['x-content-type-options'], path).toBe('nosniff');
      expect(headers['referrer-policy'], path).toBe('same-origin');
    }
  });

  it('creates a workspace from the workspace list, with its creator as owner', async () => {
    await page.goto(`${url}/console/workspaces`);
    // Blank (spaces pass the browser's `required`): refused, saying what to give.
    await page.getByLabel('Workspace name').fill('   ');
    await page.getByRole('button', { name: 'Create workspace' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('Workspace name: give 1 to 200 characters.');
    await page.getByLabel('Workspace name').fill('Initech');
    await page.getByRole('button', { name: 'Create workspace' }).click();
    await page.getByText('Workspace "Initech" created.').waitFor();
    const created = /\/console\/w\/([^/]+)\/api-key$/.exec(page.url())?.[1];
    expect(created).toMatch(/^ws_/);
    expect(await page.getByText('your role: owner').count()).toBe(1);
    const members = await admin.call('GET', `/admin/v1/workspaces/${created}/members`);
    expect(members.body.items).toMatchObject([{ email: OWNER.email, role: 'owner' }]);
    expect((await admin.call('GET', `/admin/v1/workspaces/${created}`)).body).toMatchObject({ name: 'Initech', plan: 'free' });
    const audit = await service.db.query<{ actor: string; action: string }>('SELECT actor, action FROM audit_log WHERE workspace_id = $1', [created]);
    expect(audit.rows).toEqual(expect.arrayContaining([{ actor: `console:${OWNER.email}`, action: 'workspace.created' }]));
    await page.goto(`${url}/console/workspaces`);
    expect(await page.getByRole('row', { name: /Initech/ }).textContent()).toContain('owner');
  });

  it('creates a key on the API Key page, shows it once, and the key sends events', async () => {
    await page.getByRole('link', { name: 'Acme shop' }).click();
    await page.getByRole('link', { name: 'API Key' }).click();
    await page.getByLabel('Name').fill('checkout server');
    await page.getByRole('button', { name: 'Create key' }).click();
    key = ((await page.locator('#new-key').textContent()) ?? '').trim();
    expect(key).toMatch(/^evk_live_/);
    await expect.poll(() => page.getByText('the only time the whole key is shown').count()).toBe(1);
    await accessible('api-key-created');
    await send(key, 'purchase');
    // The list shows the key by its name and start, never whole.
    await page.goto(`${url}/console/w/${ws1}/api-key`);
    const row = page.getByRole('row', { name: /checkout server/ });
    expect(await row.textContent()).toContain(key.slice(0, 12));
    expect(await page.content()).not.toContain(key);
    await accessible('api-key');
  });

  it('revokes a key after a confirmation, and the key is refused', async () => {
    await page.getByLabel('Name').fill('old web tag');
    await page.getByLabel('Test').check();
    await page.getByRole('button', { name: 'Create key' }).click();
    const old = ((await page.locator('#new-key').textContent()) ?? '').trim();
    expect(old).toMatch(/^evk_test_/);
    await page.getByRole('link', { name: 'Revoke old web tag' }).click();
    expect(await page.getByRole('alert').textContent()).toContain('refused (401) within 5 seconds');
    await accessible('revoke-confirm');
    await page.getByRole('button', { name: 'Revoke key' }).click();
    await page.getByText('Key revoked.').waitFor();
    expect(await page.getByRole('row', { name: /old web tag/ }).textContent()).toContain('revoked');
    await eventually('the revoked key is refused', async () => {
      const r = await fetch(`${url}/v1/events`, {
        method: 'POST',
        headers: { authorization: `Bearer ${old}`, 'content-type': 'application/json' },
        body: JSON.stringify([webEvent()]),
      });
      return r.status === 401;
    }, 5_000);
  });

  it('picks the sent event on Forwarding and maps it to a platform event', async () => {
    // Event names are flushed in batches every few seconds.
    await eventually('purchase listed', async () => {
      await page.goto(`${url}/console/w/${ws1}/forwarding`);
      return (await page.getByLabel('Forward purchase').count()) === 1;
    }, 10_000);
    await page.getByLabel('Forward purchase').check();
    await page.getByLabel('Platform event for purchase').selectOption('CompletePayment');
    await page.getByLabel('Pixel id').fill('PIXEL123');
    // For the test-mode key of "fills Activity" below (set here: enrich keeps a setup it read for a second).
    await page.getByLabel('Test event code (optional)').fill('TEST4242');
    await page.getByRole('button', { name: 'Save forwarding' }).click();
    await page.getByText('Forwarding saved: 1 event forwarded.').waitFor();
    await accessible('forwarding');
    // On a phone: nothing wider than the screen but the tables' own scroll areas.
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await accessible('forwarding-phone');
    await page.setViewportSize({ width: 1100, height: 800 });
    const setup = await admin.call('GET', `/admin/v1/workspaces/${ws1}/forwarding`);
    expect(setup.body).toMatchObject({ event_source_id: 'PIXEL123', test_event_code: 'TEST4242', events: [{ name: 'purchase', platform_event: 'CompletePayment' }] });
  });

  it('refuses a named event without its platform event, saying what to fix', async () => {
    await page.getByLabel('Another event name (optional)').fill('sign_up');
    await page.getByRole('button', { name: 'Save forwarding' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('Choose the platform event for "sign_up"');
  });

  it('connects the ad account through the platform authorize page', async () => {
    await page.goto(`${url}/console/w/${ws1}/connection`);
    await accessible('connection-disconnected');
    await page.getByRole('button', { name: 'Connect ad account' }).click();
    // The sandbox approves at once and sends the browser back to the OAuth callback.
    await page.getByRole('heading', { name: 'Ad account connected' }).waitFor();
    expect(page.url()).toContain('/oauth/callback');
    await page.goto(`${url}/console/w/${ws1}/connection`);
    expect(await page.locator('.badge').first().textContent()).toBe('connected');
    expect(await page.content()).toContain('America/New_York');
    await accessible('connection');
  });

  it('shows the delivered conversion in Activity', async () => {
    await send(key, 'purchase');
    await eventually('the sandbox received the conversion', async () => (await receivedBySandbox(sandbox)).length >= 1, 15_000);
    await page.goto(`${url}/console/w/${ws1}/activity`);
    const today = new Date().toISOString().slice(0, 10);
    const row = page.getByRole('row', { name: new RegExp(today) }).first();
    expect((await row.locator('td').nth(1).textContent())?.trim()).toBe('1');
    expect(await page.getByRole('heading', { name: 'Dead letters' }).count()).toBe(1);
    expect(await page.getByText('No dead letters.').count()).toBe(1);
    await accessible('activity');
  });

  it('shows the delivered purchase in Deliveries with its match quality, keys and answer', async () => {
    const [received] = await receivedBySandbox(sandbox);
    const [api] = (await admin.call('GET', `/admin/v1/workspaces/${ws1}/deliveries?event_id=${encodeURIComponent(received!.event_id)}`)).body.items;
    expect(api).toMatchObject({ destination: 'tiktok', outcome: 'sent' });
    await page.goto(`${url}/console/w/${ws1}/activity`);
    const table = page.getByRole('table', { name: 'Deliveries per event and destination' });
    const row = table.getByRole('row', { name: new RegExp(received!.event_id) });
    const cells = (await row.locator('td').allTextContents()).map((c) => c.trim());
    // Last attempt, event id, destination, outcome, attempts, match quality, match keys, platform answer.
    expect(cells.slice(1, 5)).toEqual([received!.event_id, 'TikTok', 'sent', '1']);
    expect(cells[5]).toBe(api.match_quality.toFixed(1));
    expect(Number(cells[5])).toBeGreaterThan(0);
    expect(cells[6]).toContain('ttclid');
    expect(cells[6]).toContain('email');
    expect(cells[7]).toMatch(/^0: OK/);
    // Filtered to an outcome it does not have: not listed.
    await page.getByLabel('Outcome').selectOption('dead');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.getByText('No deliveries match this filter.').waitFor();
    expect(page.url()).toContain('d_outcome=dead');
    await accessible('activity');
  });

  it('explains why each user field of that conversion went (Activity, "Why this field")', async () => {
    const [received] = await receivedBySandbox(sandbox);
    await page.goto(`${url}/console/w/${ws1}/activity`);
    await page.getByLabel('Event id').fill(received!.event_id);
    await page.getByRole('button', { name: 'Explain' }).click();
    const table = page.getByRole('table', { name: 'Why each user field was forwarded' });
    await table.waitFor();
    const email = table.getByRole('row', { name: /user\.email/ }).first();
    expect(await email.locator('td').nth(1).textContent()).toBe('yes');
    expect(await email.locator('td').nth(2).textContent()).toBe('graph_link');
    expect(await email.locator('td').nth(4).textContent()).toMatch(/^email_sha256, last seen/);
    expect(await page.getByText('ad_user_data GRANTED').count()).toBe(1);
    await accessible('activity');
    // Unknown: said so, no table.
    await page.getByLabel('Event id').fill('no-such-event');
    await page.getByRole('button', { name: 'Explain' }).click();
    await page.getByText(/No conversion no-such-event in this workspace/).waitFor();
    expect(await page.getByRole('table', { name: 'Why each user field was forwarded' }).count()).toBe(0);
  });

  it('fills Activity: dropped by reason, failed by platform code, the dead letter, and a test event the platform received', async () => {
    // Refused for good by the platform once: a failed send with its code, and a dead letter.
    await sandboxControl(sandbox, '/faults', { events: [{ code: 40002, message: 'data[0].event: event "CompletePayment" is not enabled for this pixel', times: 1 }] });
    await send(key, 'purchase');
    // A test-mode key's events go with the setup's test event code (saved on Forwarding above).
    await page.goto(`${url}/console/w/${ws1}/api-key`);
    await page.getByLabel('Name').fill('staging tag');
    await page.getByLabel('Test').check();
    await page.getByRole('button', { name: 'Create key' }).click();
    const testKey = ((await page.locator('#new-key').textContent()) ?? '').trim();
    expect(testKey).toMatch(/^evk_test_/);
    await send(testKey, 'purchase');
    const testEvent = await eventually('the sandbox received the test event', async () => (await receivedBySandbox(sandbox)).find((e) => e.test_event_code === 'TEST4242'), 15_000);

    const [first] = await receivedBySandbox(sandbox);
    const failed = page.getByRole('table', { name: 'Failed sends by platform code and day' });
    await eventually('the failed send is listed', async () => {
      await page.goto(`${url}/console/w/${ws1}/activity?event_id=${encodeURIComponent(first!.event_id)}`);
      return (await failed.count()) === 1;
    }, 15_000);
    const today = new Date().toISOString().slice(0, 10);
    expect(await failed.getByRole('row', { name: new RegExp(`${today} 40002`) }).locator('td').nth(2).textContent()).toBe('1');
    // The first send came before any forwarding setup (and the revoked test key's, maybe, too).
    const dropped = page.getByRole('table', { name: 'Dropped conversions by reason and day' });
    expect(Number(await dropped.getByRole('row', { name: /no_forwarding_setup/ }).locator('td').nth(2).textContent())).toBeGreaterThanOrEqual(1);
    const letters = page.getByRole('table', { name: 'Dead letters waiting' });
    expect(await letters.getByRole('row', { name: /not enabled for this pixel/ }).count()).toBe(1);
    expect(await page.getByRole('button', { name: 'Redrive selected' }).count()).toBe(1);
    const tests = page.getByRole('table', { name: 'Test events the platform received' });
    const testRow = tests.getByRole('row', { name: new RegExp(testEvent.event_id) });
    expect(await testRow.textContent()).toContain('CompletePayment');
    expect(await testRow.textContent()).toContain('TEST4242');
    const perDay = page.getByRole('row', { name: new RegExp(`^${today}`) }).first();
    expect((await perDay.locator('td').nth(2).textContent())?.trim()).toBe('1'); // test events
    expect((await perDay.locator('td').nth(3).textContent())?.trim()).toBe('1'); // failed
    // The whole page, every table filled (and "Why this field" for the first conversion).
    await page.getByRole('table', { name: 'Why each user field was forwarded' }).waitFor();
    await accessible('activity');
  });

  it('lists the refused delivery with the platform\'s message, and an owner sends it again with "Redrive shown"', async () => {
    await page.goto(`${url}/console/w/${ws1}/activity?d_outcome=refused`);
    const table = page.getByRole('table', { name: 'Deliveries per event and destination' });
    const row = table.getByRole('row', { name: /not enabled for this pixel/ });
    expect(await row.count()).toBe(1);
    const eventId = ((await row.locator('td').nth(1).textContent()) ?? '').trim();
    expect((await row.locator('td').nth(3).textContent())?.trim()).toBe('refused');
    expect((await row.locator('td').nth(7).textContent())?.trim()).toMatch(/^40002: /);
    // Checked, not pictured: the screenshot of Activity is the whole page of the test before.
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByRole('button', { name: 'Redrive shown' }).click();
    await page.getByText('1 delivery sent again.').waitFor();
    expect(page.url()).toContain('d_outcome=refused');
    await eventually('the redriven delivery reached the platform', async () => (await receivedBySandbox(sandbox)).some((e) => e.event_id === eventId), 15_000);
    const audit = await service.db.query<{ actor: string }>(`SELECT actor FROM audit_log WHERE workspace_id = $1 AND action = 'deliveries.redriven'`, [ws1]);
    expect(audit.rows.map((r) => r.actor)).toEqual([expect.stringContaining(OWNER.email)]);
  });

  it('shows a connection revoked at the platform as needing re-authorisation, and reconnects', async () => {
    await sandboxControl(sandbox, '/revoke-all', {});
    await send(key, 'purchase');
    await eventually('needs_reauth', async () => (await admin.call('GET', `/admin/v1/workspaces/${ws1}/connection`)).body.status === 'needs_reauth', 15_000);
    await page.goto(`${url}/console/w/${ws1}/connection`);
    expect(await page.locator('.badge').first().textContent()).toBe('needs re-authorisation');
    await accessible('connection-needs-reauth');
    await page.getByRole('button', { name: 'Reconnect ad account' }).click();
    await page.getByRole('heading', { name: 'Ad account connected' }).waitFor();
    await page.goto(`${url}/console/w/${ws1}/connection`);
    expect(await page.locator('.badge').first().textContent()).toBe('connected');
  });

  it('disconnects after a confirmation that says access must also be removed on the platform', async () => {
    await page.goto(`${url}/console/w/${ws1}/connection`);
    await page.getByRole('link', { name: 'Disconnect ad account' }).click();
    expect(await page.getByRole('alert').textContent()).toContain('Access must also be removed on the platform side');
    await accessible('disconnect-confirm');
    await page.getByRole('button', { name: 'Disconnect' }).click();
    await page.getByText('Ad account disconnected.').waitFor();
    expect(await page.locator('.badge').first().textContent()).toBe('disconnected');
    expect((await admin.call('GET', `/admin/v1/workspaces/${ws1}/connection`)).body.status).toBe('disconnected');
    const audit = await service.db.query<{ actor: string; action: string }>('SELECT actor, action FROM audit_log WHERE workspace_id = $1', [ws1]);
    expect(audit.rows).toEqual(
      expect.arrayContaining([
        { actor: `console:${OWNER.email}`, action: 'api_key.created' },
        { actor: `console:${OWNER.email}`, action: 'forwarding.updated' },
        { actor: `console:${OWNER.email}`, action: 'connection.disconnected' },
      ]),
    );
  });

  it('a user of workspace 1 cannot reach workspace 2 by URL, to read or to change', async () => {
    for (const tab of ['api-key', 'forwarding', 'connection', 'activity']) {
      const r = await page.goto(`${url}/console/w/${ws2}/${tab}`);
      expect(r?.status()).toBe(404);
      expect(await page.content()).not.toContain('Globex');
    }
    await accessible('not-found');
    // Even with a valid CSRF token of the user's own session.
    await page.goto(`${url}/console/w/${ws1}/api-key`);
    const token = await page.locator('input[name=_csrf]').first().inputValue();
    const r = await page.request.post(`${url}/console/w/${ws2}/api-key`, { form: { _csrf: token, name: 'stolen', mode: 'live' } });
    expect(r.status()).toBe(404);
    expect((await admin.call('GET', `/admin/v1/workspaces/${ws2}/api-keys`)).body.keys).toEqual([]);
  });

  it('refuses a form post without its CSRF token', async () => {
    const before = (await admin.call('GET', `/admin/v1/workspaces/${ws1}/api-keys`)).body.keys.length;
    const r = await page.request.post(`${url}/console/w/${ws1}/api-key`, { form: { name: 'forged', mode: 'live' } });
    expect(r.status()).toBe(403);
    expect(await r.text()).toContain('CSRF');
    const wrong = await page.request.post(`${url}/console/w/${ws1}/api-key`, { form: { _csrf: 'forged-token', name: 'forged', mode: 'live' } });
    expect(wrong.status()).toBe(403);
    expect((await admin.call('GET', `/admin/v1/workspaces/${ws1}/api-keys`)).body.keys.length).toBe(before);
  });

  it('a member sees the settings read-only and cannot change them', async () => {
    await browser.context.clearCookies();
    await page.goto(`${url}/console`);
    await page.getByLabel('Email').fill(MEMBER.email);
    await page.getByLabel('Password').fill(MEMBER.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('link', { name: 'Acme shop' }).click();
    expect(await page.getByRole('button', { name: 'Create key' }).count()).toBe(0);
    expect(await page.getByText('Only owners of this workspace create or revoke keys.').count()).toBe(1);
    const token = await page.locator('input[name=_csrf]').first().inputValue();
    const r = await page.request.post(`${url}/console/w/${ws1}/api-key`, { form: { _csrf: token, name: 'by a member', mode: 'live' } });
    expect(r.status()).toBe(403);
    await page.goto(`${url}/console/w/${ws1}/forwarding`);
    expect(await page.getByRole('button', { name: 'Save forwarding' }).count()).toBe(0);
  });

  it('signs out, and rate-limits repeated sign-in attempts', async () => {
    await page.goto(`${url}/console/w/${ws1}/api-key`);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    expect((await page.goto(`${url}/console/w/${ws1}/api-key`))?.url()).toBe(`${url}/console`);
    let status = 0;
    for (let i = 0; i < 12 && status !== 429; i++) {
      await page.goto(`${url}/console`);
      await page.getByLabel('Email').fill(OWNER.email);
      await page.getByLabel('Password').fill(`wrong ${i}`);
      const [answer] = await Promise.all([page.waitForResponse((r) => r.url().endsWith('/console/sign-in')), page.getByRole('button', { name: 'Sign in' }).click()]);
      status = answer.status();
    }
    expect(status).toBe(429);
    expect(await page.getByRole('alert').textContent()).toContain('Too many sign-in attempts');
  });
});
