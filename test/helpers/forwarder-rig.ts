/**
 * Test support for the forwarder (used by its tests and by test/e2e and test/reliability): a factory of
 * conversions.ready records, and a rig with a real platform sandbox over loopback HTTP, an in-memory embedded
 * store and the real platform side (createPlatformSide) whose loops tests drive step by step.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { startSandbox, type RunningSandbox, type StartSandboxOptions } from '../sandbox/server.js';
import { loadConfig, type Config } from '../../services/shared/config.js';
import { conversionKey, type ConversionReady, type PlatformEventRecord } from '../../services/domain/conversion.js';
import type { Db } from '../../services/shared/db/db.js';
import { openDatabase } from '../../services/shared/db/open.js';
import { silentLogger, type Logger } from '../../services/shared/logger.js';
import { EmbeddedLog } from '../../services/stream/embedded/log.js';
import { EmbeddedStageRunner } from '../../services/stream/embedded/runner.js';
import { Topics } from '../../services/shared/topics.js';
import { newId } from '../../services/shared/ids.js';
import type { CallbackResult } from '../../services/forwarder/oauth-flow.js';
import { createPlatformSide, type PlatformSide } from '../../services/compose/platform.js';

export const SANDBOX_APP = { id: 'sandbox-app', secret: 'sandbox-secret' } as const;

/** The service's platform variables pointing at a running sandbox, with the sandbox's app. */
export const sandboxPlatformEnv = (sandbox: Pick<RunningSandbox, 'apiBase' | 'authUrl'>): Record<string, string> => ({
  PLATFORM_API_BASE: sandbox.apiBase,
  PLATFORM_AUTH_URL: sandbox.authUrl,
  PLATFORM_APP_ID: SANDBOX_APP.id,
  PLATFORM_APP_SECRET: SANDBOX_APP.secret,
});

type RecordOverrides = Partial<Omit<PlatformEventRecord, 'event_id'>>;

/** A valid conversions.ready record for a workspace; every call gets a fresh event_id unless given one. */
export function conversion(
  workspaceId: string,
  over: Partial<Omit<ConversionReady, 'record' | 'workspace_id'>> & { record?: RecordOverrides } = {},
): ConversionReady {
  const eventId = over.event_id ?? `evt-${randomUUID()}`;
  const { record: recordOver, ...rest } = over;
  return {
    v: 1,
    workspace_id: workspaceId,
    key_mode: 'live',
    event_id: eventId,
    received_at: Date.now(),
    event_source: 'WEB',
    event_source_id: 'PIXEL123',
    test_event_code: null,
    ...rest,
    record: {
      event: 'CompletePayment',
      event_id: eventId,
      event_time: Math.floor(Date.now() / 1000),
      limited_data_use: false,
      page: { url: 'https://shop.example/checkout?ttclid=E.C.P.abc' },
      user: { ttclid: 'E.C.P.abc', user_agent: 'Mozilla/5.0' },
      conversion_date_time: '2030-01-01 10:00:00-05:00',
      consent: { ad_user_data: 'GRANTED', ad_personalization: 'GRANTED' },
      ...recordOver,
    },
  };
}

/** Runs the sandbox's authorize page like a browser would; returns the query the platform sends back. */
export async function authorizeInSandbox(authorizeUrl: string): Promise<Record<string, string>> {
  const res = await fetch(authorizeUrl, { redirect: 'manual' });
  const location = res.headers.get('location');
  if (res.status !== 302 || !location) throw new Error(`authorize page answered ${res.status}: ${await res.text()}`);
  return Object.fromEntries(new URL(location).searchParams);
}

/** What the sandbox received, in arrival order. */
export async function receivedBySandbox(sandbox: RunningSandbox): Promise<Array<{ event_id: string; test_event_code: string | null; record: any }>> {
  const r = (await (await fetch(`${sandbox.controlUrl}/received`)).json()) as { events: Array<{ test_event_code: string | null; record: any }> };
  return r.events.map((e) => ({ event_id: String(e.record.event_id), test_event_code: e.test_event_code, record: e.record }));
}

export async function sandboxControl(sandbox: RunningSandbox, path: string, body?: unknown): Promise<any> {
  const r = await fetch(`${sandbox.controlUrl}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (r.status >= 400) throw new Error(`sandbox control ${path}: ${r.status} ${await r.text()}`);
  return r.json();
}

/** Polls until `check` returns a truthy value, or fails with `what` after timeoutMs. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined | false | null>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export interface ForwarderRig {
  readonly sandbox: RunningSandbox;
  readonly db: Db;
  readonly log: EmbeddedLog;
  readonly config: Config;
  readonly platform: PlatformSide;
  /** The platform side's intake stage on the embedded runtime, driven step by step by the tests. */
  readonly intake: EmbeddedStageRunner<unknown, never>;
  /** Creates a workspace row. */
  workspace(): Promise<string>;
  /** The whole OAuth flow against the sandbox, callback included. */
  connect(workspaceId: string): Promise<CallbackResult>;
  append(conversions: readonly ConversionReady[]): Promise<void>;
  received(): ReturnType<typeof receivedBySandbox>;
  /** Another platform side on the same store (a second replica). */
  replica(): PlatformSide;
  close(): Promise<void>;
}

export async function startRig(
  opts: { sandbox?: StartSandboxOptions; env?: Record<string, string>; logger?: Logger } = {},
): Promise<ForwarderRig> {
  const sandbox = await startSandbox({ port: 0, ...opts.sandbox });
  const db = await openDatabase({ inMemory: true });
  const log = new EmbeddedLog(db);
  const config = loadConfig({
    ...sandboxPlatformEnv(sandbox),
    PUBLIC_BASE_URL: 'http://127.0.0.1:9',
    FORWARDER_LINGER_MS: '10',
    FORWARDER_RETRY_BASE_MS: '20',
    FORWARDER_RETRY_MAX_MS: '200',
    FORWARDER_REQUEST_TIMEOUT_MS: '2000',
    REFRESH_INTERVAL_MS: '50',
    ...opts.env,
  });
  const credentialsKey = randomBytes(32);
  const logger = opts.logger ?? silentLogger;
  const side = (): PlatformSide =>
    createPlatformSide({ config, db, credentialsKey, logger, roles: { forwarder: true, refresher: true, console: true } });
  const platform = side();
  const intake = new EmbeddedStageRunner(db, log, platform.intake!, { logger });
  const replicas: PlatformSide[] = [];
  return {
    sandbox,
    db,
    log,
    config,
    platform,
    intake,
    async workspace() {
      const id = newId('ws');
      await db.query('INSERT INTO workspaces (id, name, plan) VALUES ($1, $2, $3)', [id, 'acme', 'free']);
      return id;
    },
    async connect(workspaceId) {
      // The rig is the browser: it starts the flow bound to itself and completes it with the same binding.
      const binding = 'rig-browser';
      const { authorizeUrl } = await platform.flow.start(workspaceId, { binding });
      return platform.flow.complete(await authorizeInSandbox(authorizeUrl), binding);
    },
    async append(conversions) {
      await log.append(
        Topics.conversionsReady,
        conversions.map((c) => ({ key: conversionKey(c), value: c })),
        Date.now() + 10_000,
      );
    },
    received: () => receivedBySandbox(sandbox),
    replica() {
      const r = side();
      replicas.push(r);
      return r;
    },
    async close() {
      for (const r of replicas) await r.close();
      await intake.stop();
      await platform.close();
      await log.close();
      await db.close();
      await sandbox.close();
    },
  };
}
