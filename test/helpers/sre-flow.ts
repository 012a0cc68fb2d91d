/**
 * The short flow the Prometheus tests observe (test/e2e/prometheus.test.ts on the embedded runtime,
 * test/integration/kafka-prometheus.test.ts on Kafka): a workspace connected through the platform sandbox; a platform
 * outage (two 503s) then a permanent rejection, so the first batch is retried and dead-lettered; a batch forwarded;
 * a duplicate; rejected events (a bad request of three, one without a key); a dry-run replay of the workspace's range
 * (it reads the four accepted events again). Returns when Prometheus has seen it all.
 */
import { randomBytes } from 'node:crypto';
import { eventually, receivedBySandbox, sandboxControl, sandboxPlatformEnv } from './forwarder-rig.js';
import type { RunningSandbox } from '../sandbox/server.js';
import { newBrowser } from './browser.js';
import { adminClient } from './admin-client.js';
import type { RunningPrometheus } from './prometheus.js';
import { sha256, webEvent } from './factories.js';
import { TEST_ADMIN_TOKEN } from './service-process.js';
import { SETUP } from './workspaces.js';

/** The service's variables for a run against the platform sandbox on `port`, with short forwarder timings. */
export function sandboxServiceEnv(sandbox: RunningSandbox, port: number): Record<string, string> {
  return {
    PORT: String(port),
    PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
    ...sandboxPlatformEnv(sandbox),
    FORWARDER_LINGER_MS: '30',
    FORWARDER_RETRY_BASE_MS: '30',
    FORWARDER_RETRY_MAX_MS: '300',
    REFRESH_INTERVAL_MS: '200',
    LOG_LEVEL: 'info',
  };
}

export interface SreFlow {
  readonly workspace: string;
  readonly key: string;
  /** The request id of the batch that was forwarded. */
  readonly forwardedRequestId: string;
}

export async function runSreFlow(serviceUrl: string, sandbox: RunningSandbox, prom: RunningPrometheus, timeoutMs = 20_000): Promise<SreFlow> {
  const admin = adminClient(serviceUrl, TEST_ADMIN_TOKEN);
  const value = async (expr: string): Promise<number> => Number((await prom.query(expr))[0]?.value[1] ?? NaN);
  const from = new Date(Date.now() - 60_000).toISOString();
  const workspace = (await admin.createWorkspace('sre-flow')).id;
  const key = (await admin.createKey(workspace, 'live')).key;
  const post = async (body: unknown, auth = true): Promise<{ status: number; body: any }> => {
    const r = await fetch(`${serviceUrl}/v1/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(auth ? { authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify(body),
    });
    return { status: r.status, body: await r.json() };
  };
  const expectStatus = (what: string, got: number, want: number): void => {
    if (got !== want) throw new Error(`${what}: answered ${got}, expected ${want}`);
  };

  expectStatus('forwarding setup', (await admin.call('PUT', `/admin/v1/workspaces/${workspace}/forwarding`, { ...SETUP, test_event_code: undefined })).status, 200);
  const started = await admin.call('POST', `/admin/v1/workspaces/${workspace}/connection`);
  // A browser: the connect link binds the flow with a cookie, which the callback needs.
  expectStatus('OAuth callback', (await newBrowser().open(started.body.authorize_url)).status, 200);

  await sandboxControl(sandbox, '/faults', { events: [{ http_status: 503, times: 2 }, { code: 40001, times: 1 }] });
  expectStatus('first batch', (await post([webEvent(), webEvent()])).status, 202);
  await eventually('the dead letter', async () => (await value('sum(forwarder_conversions_total{outcome="dead_lettered"})')) >= 2, timeoutMs);

  const e3 = webEvent();
  const second = await post([e3, webEvent()]);
  expectStatus('second batch', second.status, 202);
  expectStatus('a duplicate', (await post([e3])).status, 202);
  expectStatus('a bad request of three events', (await post([webEvent(), {}, webEvent()])).status, 400);
  expectStatus('a request without a key', (await post([webEvent()], false)).status, 401);

  await eventually('the platform received the second batch', async () => (await receivedBySandbox(sandbox)).length >= 2, timeoutMs);
  await eventually(
    'Prometheus saw the duplicate and the forwarded conversions',
    async () =>
      (await value('sum(stage_records_total{stage="dedupe",outcome="drop",reason="duplicate"})')) >= 1 &&
      (await value('sum(forwarder_conversions_total{outcome="forwarded"})')) >= 2 &&
      (await value('sum(rate(forwarder_end_to_end_seconds_count[1m]))')) > 0,
    timeoutMs,
  );
  const replay = await admin.call('POST', `/admin/v1/workspaces/${workspace}/replays`, {
    from,
    to: new Date(Date.now() + 1_000).toISOString(),
    dry_run: true,
  });
  expectStatus('a dry-run replay', replay.status, 202);
  await eventually(
    'the replay ended and Prometheus saw it',
    async () =>
      (await admin.call('GET', `/admin/v1/workspaces/${workspace}/replays/${replay.body.id}`)).body.status === 'done' &&
      (await value('sum(replay_events_read_total)')) >= 4 &&
      (await value('max(replay_jobs{status="running"})')) === 0,
    timeoutMs,
  );
  // Two more scrapes (a rate needs two samples of a new series) and rule evaluations after the last change.
  await prom.settledSince(Date.now(), timeoutMs);
  return { workspace, key, forwardedRequestId: second.body.request_id as string };
}

/**
 * What the service's log (its stdout) gets wrong about the flow (empty: all good): one JSON line per request, the
 * forwarded request's id in the forwarder's batch line and the dead-lettered batch's line, and never a key, the
 * admin token, an identifier hash or an unredacted token.
 */
export function flowLogProblems(output: string, flow: SreFlow): string[] {
  const problems: string[] = [];
  const lines = output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, any>);
  const requestLine = lines.find((l) => l.msg === 'request' && l.reqId === flow.forwardedRequestId);
  if (!requestLine) problems.push('no request line with the forwarded request id');
  else {
    const want = { route: '/v1/events', method: 'POST', status: 202, events: 2, workspace: flow.workspace };
    for (const [k, v] of Object.entries(want)) if (requestLine[k] !== v) problems.push(`request line ${k}: ${JSON.stringify(requestLine[k])}, expected ${JSON.stringify(v)}`);
  }
  const ingestLines = lines.filter((l) => l.msg === 'request' && l.route === '/v1/events').length;
  if (ingestLines !== 5) problems.push(`${ingestLines} request lines for /v1/events, expected 5`);
  // The request's two conversions: one batch on the embedded runtime, one or two on Kafka (their keys may land on
  // different partitions of conversions.ready).
  const batchLines = lines.filter((l) => l.msg === 'batch forwarded' && Array.isArray(l.request_ids) && l.request_ids.includes(flow.forwardedRequestId));
  const records = batchLines.reduce((n, l) => n + (l.records as number), 0);
  if (batchLines.length === 0) problems.push("no 'batch forwarded' line with the forwarded request id");
  else if (records !== 2 || batchLines.some((l) => l.workspace !== flow.workspace || l.code !== '0')) problems.push(`batch lines: ${JSON.stringify(batchLines)}`);
  if (!lines.some((l) => l.msg === 'platform rejected conversions: dead-lettered' && l.request_ids?.length === 1)) problems.push('no dead-letter line with one request id');
  if (output.includes(flow.key)) problems.push('an API key in the log');
  if (output.includes(sha256('jane@example.com'))) problems.push('an identifier hash in the log');
  if (output.includes(TEST_ADMIN_TOKEN)) problems.push('the admin token in the log');
  if (/access_token"\s*:\s*"(?!\[redacted\])/.test(output)) problems.push('an unredacted access token in the log');
  return problems;
}
