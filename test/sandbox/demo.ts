/**
 * `make demo`: the whole flow in one command, on a throw-away instance. Starts the platform sandbox and a service of
 * its own (embedded runtime, a free port, a temporary DATA_DIR deleted at the end) wired to it, then does what an operator and a customer would: create a workspace and a live
 * API key, choose the conversions to forward, connect the ad account by OAuth (following the authorize redirect
 * like a browser), send a few events over HTTP, and print what the platform received. Exits 0 when the
 * conversions arrived, 1 otherwise.
 */
import { randomBytes, createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectLikeABrowser } from './connect.js';
import { freePort } from './ports.js';
import { startSandbox } from './server.js';
import { startService } from '../../services/compose/service.js';
import { loadConfig } from '../../services/shared/config.js';
import { createLogger } from '../../services/shared/logger.js';

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');
const say = (line: string): void => void process.stdout.write(`${line}\n`);

async function main(): Promise<number> {
  const dataDir = mkdtempSync(join(tmpdir(), 'event-forwarder-demo-'));
  const sandbox = await startSandbox({ port: 0, timezone: 'Europe/Berlin' });
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const adminToken = `demo_${randomBytes(16).toString('hex')}`;
  const config = loadConfig({
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    ADMIN_TOKEN: adminToken,
    PUBLIC_BASE_URL: base,
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
    PLATFORM_API_BASE: sandbox.apiBase,
    PLATFORM_AUTH_URL: sandbox.authUrl,
    PLATFORM_APP_ID: sandbox.app.sandbox.appId,
    PLATFORM_APP_SECRET: sandbox.app.sandbox.appSecret,
    FORWARDER_LINGER_MS: '100',
    LOG_LEVEL: 'warn',
  });
  say('A throw-away instance: a service and a platform sandbox of its own on free ports, with a temporary data');
  say('directory, all gone when the demo ends. Your `make run`, its ./data and its workspaces are not touched.\n');
  const service = await startService(config, createLogger(config.logLevel, { role: 'demo' }));
  await service.app.listen({ port, host: '127.0.0.1' });
  say(`platform sandbox   ${sandbox.url}`);
  say(`service            ${base}   (data in ${dataDir}, deleted at the end)`);

  const admin = async (method: string, path: string, body?: unknown): Promise<any> => {
    const r = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${adminToken}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    if (r.status >= 300) throw new Error(`${method} ${path} answered ${r.status}: ${text}`);
    return text ? JSON.parse(text) : undefined;
  };

  try {
    const ws = await admin('POST', '/admin/v1/workspaces', { name: 'Demo Shop', plan: 'starter' });
    say(`\n1. workspace        ${ws.id}`);
    const key = await admin('POST', `/admin/v1/workspaces/${ws.id}/api-keys`, { mode: 'live' });
    say(`2. live API key     ${key.key.slice(0, 12)}…`);
    await admin('PUT', `/admin/v1/workspaces/${ws.id}/forwarding`, {
      event_source: 'WEB',
      event_source_id: 'PIXEL123',
      pii_mode: 'hashed',
      click_window_days: 7,
      events: [
        { name: 'purchase', platform_event: 'CompletePayment' },
        { name: 'sign_up', platform_event: 'CompleteRegistration' },
      ],
    });
    say('3. forwarding       purchase → CompletePayment, sign_up → CompleteRegistration (pixel PIXEL123)');

    const { authorize_url: authorizeUrl } = await admin('POST', `/admin/v1/workspaces/${ws.id}/connection`);
    say(`4. connect          ${authorizeUrl.split('?')[0]}?…`);
    const page = await connectLikeABrowser(authorizeUrl);
    const title = /<h1>([^<]*)<\/h1>/.exec(page.html)?.[1] ?? `HTTP ${page.status}`;
    const conn = await admin('GET', `/admin/v1/workspaces/${ws.id}/connection`);
    say(`   callback page    "${title}"`);
    say(`   connection       ${conn.status}, advertiser ${conn.advertiser_id}, time zone ${conn.time_zone}, token expires ${conn.access_expires_at}`);

    const consent4 = { analytics_storage: 'GRANTED', ad_storage: 'GRANTED', ad_user_data: 'GRANTED', ad_personalization: 'GRANTED' };
    const web = (name: string, idempotencyKey: string, url: string) => ({
      event_name: name,
      event_source: 'WEB',
      event_data: { client_id: 'client-1', session_id: 'session-1', page_location: url, user_agent: 'Mozilla/5.0 (demo)' },
      event_metadata: {
        idempotency_key: idempotencyKey,
        identifiers: { user: 'customer-42', email: { sha256_email: sha256('jane@example.com') } },
        consent: consent4,
      },
    });
    const events = [
      web('page_view', 'demo-view-1', 'https://shop.example/shoes?ttclid=E.C.P.demo-click'),
      web('sign_up', 'demo-signup-1', 'https://shop.example/welcome'),
      web('purchase', 'demo-order-1001', 'https://shop.example/thanks?ttclid=E.C.P.demo-click'),
    ];
    const sent = await fetch(`${base}/v1/events`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
      body: JSON.stringify(events),
    });
    if (sent.status !== 202) throw new Error(`POST /v1/events answered ${sent.status}: ${await sent.text()}`);
    say(`5. events sent      page_view, sign_up, purchase → HTTP ${sent.status}`);

    const deadline = Date.now() + 20_000;
    let received: Array<{ event_source_id: string; request_id: string; record: any }> = [];
    while (Date.now() < deadline) {
      received = ((await (await fetch(`${sandbox.controlUrl}/received`)).json()) as { events: typeof received }).events;
      if (received.length >= 2) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    if (received.length < 2) {
      say(`\nThe platform received ${received.length} conversion(s) within 20 s; expected 2 (sign_up and purchase).`);
      return 1;
    }
    // A page_view must not follow: said once every stage has read all it was given and the forwarder has an answer
    // for everything it sent (the outbox empty), not after a guessed pause.
    const settled = async (): Promise<boolean> => {
      const pipeline = (await admin('GET', '/admin/v1/pipeline')) as { consumers: Array<{ lag: number }> };
      const outbox = await service.db.query<{ n: number }>('SELECT count(*)::int AS n FROM forward_outbox WHERE workspace_id = $1', [ws.id]);
      return pipeline.consumers.every((c) => c.lag === 0) && outbox.rows[0]!.n === 0;
    };
    while (!(await settled())) {
      if (Date.now() > deadline) {
        say('\nThe pipeline did not finish within 20 s.');
        return 1;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    received = ((await (await fetch(`${sandbox.controlUrl}/received`)).json()) as { events: typeof received }).events;
    say(`\n6. the platform received ${received.length} conversions (page_view is not selected, so it stays home):`);
    for (const e of received) {
      const r = e.record;
      say(`   ${r.event.padEnd(21)} event_id ${r.event_id.padEnd(16)} pixel ${e.event_source_id}  at ${r.conversion_date_time}`);
      say(`   ${''.padEnd(21)} page ${r.page?.url}  ttclid ${r.user?.ttclid ?? '-'}  email ${r.user?.email ? 'hashed' : '-'}`);
    }
    say(`\nThe whole record as the platform got it:\n${JSON.stringify(received.at(-1)!.record, null, 2)}`);
    return received.length === 2 ? 0 : 1;
  } finally {
    await service.close();
    await sandbox.close();
    rmSync(dataDir, { recursive: true, force: true });
    say('\nThe demo instance is stopped and its data deleted. The same flow on your own `make run`: README.md,');
    say('"Try it end to end".');
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`demo failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
