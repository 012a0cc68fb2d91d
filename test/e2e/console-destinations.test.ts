/**
 * The console's Destinations pages in real Chromium, against the whole service (embedded default, in this process)
 * with the TikTok sandbox and the Meta and Google stand-ins: an owner adds a Meta destination from the page (a
 * wrong pixel id shown next to its field first), edits it, connects it through Meta's dialog, sees it listed, opens
 * its deliveries (a purchase sent, one refused and redriven from its page), disconnects and removes it; axe-core on
 * every page.
 */
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdminClient } from '../helpers/admin-client.js';
import { sendPurchase, startWithStandIns, type WithStandIns } from '../helpers/destination-stand-ins.js';
import { eventually } from '../helpers/forwarder-rig.js';
import { connectThroughAdmin } from '../helpers/service-with-sandbox.js';
import { SETUP } from '../helpers/workspaces.js';
import { openBrowser, screenshot, seriousViolations, type Browser } from './console-browser.js';

const PIXEL = '5555555555';
const OWNER = { email: 'owner@multi.example', password: 'multi owner password' };
let stand: WithStandIns;
let url: string;
let admin: AdminClient;
let browser: Browser;
let page: Page;
let ws: string;
let key: string;
let metaId: string;

beforeAll(async () => {
  stand = await startWithStandIns({ name: 'console-destinations', pixels: [PIXEL] });
  ({ url, admin } = stand);
  ws = (await admin.createWorkspace('Multi shop', 'enterprise')).id;
  key = (await admin.createKey(ws, 'live')).key;
  expect((await admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, SETUP)).status).toBe(200);
  await connectThroughAdmin(admin, `/admin/v1/workspaces/${ws}/connection`);
  expect((await admin.call('POST', `/admin/v1/workspaces/${ws}/members`, { ...OWNER, role: 'owner' })).status).toBe(201);
  browser = await openBrowser();
  page = browser.page;
});
afterAll(async () => {
  await browser?.close();
  await stand?.close();
});

async function accessible(name: string): Promise<void> {
  expect(await seriousViolations(page), `axe on ${name}`).toEqual([]);
  await screenshot(page, name);
}

const send = (): Promise<string> => sendPurchase(url, key);

const deliveriesTable = () => page.getByRole('table', { name: 'Deliveries per event and destination' });

describe('the Destinations pages in Chromium', () => {
  it('lists the workspace\'s TikTok destination, connected', async () => {
    await page.goto(`${url}/console`);
    await page.getByLabel('Email').fill(OWNER.email);
    await page.getByLabel('Password').fill(OWNER.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('link', { name: 'Multi shop' }).click();
    await page.getByRole('link', { name: 'Destinations' }).click();
    const row = page.getByRole('row', { name: /TikTok/ });
    expect(await row.locator('td').nth(2).textContent()).toBe('connected');
  });

  it('adds a Meta destination from the page: a wrong pixel id is shown next to its field, then fixed', async () => {
    await page.getByRole('link', { name: 'Add a destination' }).click();
    await page.getByLabel('Meta').check();
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByLabel('Destination name').fill('Meta main pixel');
    await page.getByLabel('Pixel (dataset) id').fill('px-5555');
    await page.getByLabel('Action source').selectOption('website');
    await page.getByLabel('Another event name (optional)').fill('purchase');
    await page.getByLabel('Its platform event').fill('Purchase');
    await page.getByRole('button', { name: 'Add destination' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('The setup was not saved');
    const pixel = page.getByLabel('Pixel (dataset) id');
    expect(await pixel.getAttribute('aria-invalid')).toBe('true');
    expect(await pixel.inputValue()).toBe('px-5555');
    // The message is the field's description: a screen reader reads it with the field.
    expect(await pixel.evaluate((el) => [...(el as HTMLInputElement).getAttribute('aria-describedby')!.split(' ')].map((id) => document.getElementById(id)?.textContent).join(' '))).toContain(
      'Must be the pixel (dataset) id: digits only.',
    );
    await accessible('destination-invalid');

    await pixel.fill(PIXEL);
    await page.getByRole('button', { name: 'Add destination' }).click();
    await page.getByText('Destination "Meta main pixel" added.').waitFor();
    metaId = /\/destinations\/(dst_[^/?#]+)$/.exec(page.url())![1]!;
    expect(await page.locator('.badge').first().textContent()).toBe('disconnected');
    const api = await admin.call('GET', `/admin/v1/workspaces/${ws}/destinations/${metaId}`);
    expect(api.body).toMatchObject({ kind: 'meta', name: 'Meta main pixel', setup: { pixel_id: PIXEL, action_source: 'website', events: [{ name: 'purchase', platform_event: 'Purchase' }] } });
    await accessible('destination-added');
  });

  it('edits its setup', async () => {
    await page.getByLabel('Test event code (optional)').fill('TEST5555');
    await page.getByLabel('Personal data').selectOption('none');
    await page.getByRole('button', { name: 'Save setup' }).click();
    await page.getByText('Setup saved: 1 event forwarded to "Meta main pixel".').waitFor();
    const api = await admin.call('GET', `/admin/v1/workspaces/${ws}/destinations/${metaId}`);
    expect(api.body.setup).toMatchObject({ test_event_code: 'TEST5555', pii_mode: 'none' });
    // Back to hashed, no test code, for the sends below.
    await page.getByLabel('Test event code (optional)').fill('');
    await page.getByLabel('Personal data').selectOption('hashed');
    await page.getByRole('button', { name: 'Save setup' }).click();
    await page.getByText('Setup saved').waitFor();
    expect((await admin.call('GET', `/admin/v1/workspaces/${ws}/destinations/${metaId}`)).body.setup).not.toHaveProperty('test_event_code');
  });

  it('connects it through Meta\'s dialog, and lists it connected', async () => {
    await page.getByRole('button', { name: 'Connect Meta' }).click();
    // The stand-in's dialog approves at once and sends the browser back to the destination callback.
    await page.getByRole('heading', { name: 'Destination connected' }).waitFor();
    await page.goto(`${url}/console/w/${ws}/destinations`);
    const row = page.getByRole('row', { name: /Meta main pixel/ });
    const cells = (await row.locator('td').allTextContents()).map((c) => c.trim());
    expect(cells.slice(0, 3)).toEqual(['Meta main pixel', 'Meta', 'connected']);
    // Checked, not pictured: the list's picture is taken once it has deliveries (below).
    expect(await seriousViolations(page)).toEqual([]);
  });

  it('opens its deliveries: a purchase sent, one refused and sent again with "Redrive shown" on its page', async () => {
    const sentId = await send();
    await eventually('the Meta delivery is listed sent', async () => {
      await page.goto(`${url}/console/w/${ws}/destinations/${metaId}`);
      return (await deliveriesTable().getByRole('row', { name: new RegExp(`${sentId}.*sent`) }).count()) === 1;
    }, 15_000);
    // Only this destination's: the TikTok delivery of the same purchase is not on this page.
    expect(await deliveriesTable().getByRole('row', { name: new RegExp(sentId) }).count()).toBe(1);
    expect(await deliveriesTable().getByRole('row', { name: /TikTok/ }).count()).toBe(0);
    await accessible('destination');
    // On a phone: nothing wider than the screen but the tables' own scroll areas.
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    expect(await seriousViolations(page)).toEqual([]);
    await page.setViewportSize({ width: 1100, height: 800 });

    await fetch(`${stand.meta.controlUrl}/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ events: [{ pixel_id: PIXEL, http_status: 400, code: 100, error_subcode: 2804003, message: 'Invalid parameter', times: 1 }] }),
    });
    const refusedId = await send();
    await eventually('the refused delivery is listed', async () => {
      await page.goto(`${url}/console/w/${ws}/destinations/${metaId}?d_outcome=refused`);
      return (await deliveriesTable().getByRole('row', { name: new RegExp(`${refusedId}.*refused`) }).count()) === 1;
    }, 15_000);
    await page.getByRole('button', { name: 'Redrive shown' }).click();
    await page.getByText('1 delivery sent again.').waitFor();
    expect(page.url()).toContain(`/destinations/${metaId}?`);
    expect(page.url()).toContain('d_outcome=refused');
    await eventually('the redriven delivery is sent', async () => {
      await page.goto(`${url}/console/w/${ws}/destinations/${metaId}`);
      return (await deliveriesTable().getByRole('row', { name: new RegExp(`${refusedId}.*sent`) }).count()) === 1;
    }, 15_000);
    // The list counts them: both purchases sent now (the refused one's record turned sent), the latest attempt shown.
    await page.goto(`${url}/console/w/${ws}/destinations`);
    const cells = (await page.getByRole('row', { name: /Meta main pixel/ }).locator('td').allTextContents()).map((c) => c.trim());
    expect(cells[4]).toMatch(/UTC \(sent\)$/);
    expect(cells.slice(5)).toEqual(['2', '0', '0', '0']);
    await accessible('destinations');
  });

  it('disconnects it, then removes it, each after a confirmation', async () => {
    await page.getByRole('link', { name: 'Meta main pixel' }).click();
    await page.getByRole('link', { name: 'Disconnect Meta' }).click();
    expect(await page.getByRole('alert').textContent()).toContain('Access must also be removed on the platform side');
    await accessible('destination-disconnect-confirm');
    await page.getByRole('button', { name: 'Disconnect' }).click();
    await page.getByText('"Meta main pixel" disconnected.').waitFor();
    expect(await page.locator('.badge').first().textContent()).toBe('disconnected');

    await page.getByRole('link', { name: 'Remove destination' }).click();
    expect(await page.getByRole('alert').textContent()).toContain('This cannot be undone.');
    await page.getByRole('button', { name: 'Remove destination' }).click();
    await page.getByText('Destination "Meta main pixel" removed.').waitFor();
    expect(await page.getByRole('row', { name: /Meta main pixel/ }).count()).toBe(0);
    expect((await admin.call('GET', `/admin/v1/workspaces/${ws}/destinations/${metaId}`)).status).toBe(404);
  });
});
