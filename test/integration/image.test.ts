/**
 * The container image (`make image`), started as a runtime starts it, from its exported filesystem (chroot, the
 * image's user, entrypoint and environment, a read-only root: fixtures/image-rootfs.ts), on the local Kafka,
 * registry and an empty Postgres database: it migrates the database, gets ready, takes an event and forwards it to
 * the platform sandbox, and drains and exits 0 on SIGTERM. Also what the image holds and what it leaves out.
 * Runs from `make test-image` (IMAGE_UNDER_TEST names the image); building the image takes minutes, more than
 * `make test` can spend, so the suite skips it otherwise.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Topics } from '../../services/shared/topics.js';
import { adminClient } from '../helpers/admin-client.js';
import { eventually, receivedBySandbox } from '../helpers/forwarder-rig.js';
import { webEvent } from '../helpers/factories.js';
import { freshDatabase, infraEnv, kafkaKit, REPO_ROOT, type KafkaKit } from '../helpers/infra.js';
import { TEST_ADMIN_TOKEN } from '../helpers/service-process.js';
import { sandboxServiceEnv } from '../helpers/sre-flow.js';
import { SETUP } from '../helpers/workspaces.js';
import { connectLikeABrowser } from '../sandbox/connect.js';
import { freePorts } from '../sandbox/ports.js';
import { startSandbox, type RunningSandbox } from '../sandbox/server.js';
import { imageConfig, startFromRootfs, type RootfsProcess } from './fixtures/image-rootfs.js';

const IMAGE = process.env.IMAGE_UNDER_TEST;

describe.skipIf(!IMAGE)(`the container image ${IMAGE ?? '(IMAGE_UNDER_TEST unset: make test-image)'}`, () => {
  let work: string;
  let rootfs: string;
  let kit: KafkaKit;
  let database: Awaited<ReturnType<typeof freshDatabase>>;
  let sandbox: RunningSandbox;
  let svc: RootfsProcess | undefined;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'image-test-'));
    rootfs = join(work, 'rootfs');
    await promisify(execFile)('bash', [join(REPO_ROOT, 'infra', 'image', 'export.sh'), IMAGE!, rootfs], { timeout: 180_000 });
    [kit, database, sandbox] = await Promise.all([
      kafkaKit(infraEnv()),
      freshDatabase(infraEnv().DATABASE_URL, { migrated: false }),
      startSandbox({ port: 0 }),
    ]);
  }, 240_000);
  afterAll(async () => {
    if (svc && svc.child.exitCode === null && svc.child.signalCode === null) svc.child.kill('SIGKILL');
    await sandbox?.close();
    await kit?.close();
    await database?.drop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('runs as a non-root user, with node as its entrypoint', () => {
    const config = imageConfig(rootfs);
    expect(config.User).toMatch(/^[1-9]\d*:[1-9]\d*$/);
    expect(config.Entrypoint).toEqual(['node', 'dist/services/compose/main.js']);
    expect(config.StopSignal).toBe('SIGTERM');
  });

  // What the final stage must hold, and what only the build stages may.
  it.each([
    ['the compiled service', 'app/dist/services/compose/main.js', true],
    ['the Avro schemas', 'app/schemas/event-envelope.avsc', true],
    ['the SQL migrations', 'app/services/shared/db/migrations/0001_core.sql', true],
    ['a production dependency', 'app/node_modules/fastify/package.json', true],
    ['TypeScript sources', 'app/services/compose/main.ts', false],
    ['source maps', 'app/dist/services/compose/main.js.map', false],
    ['tests and the platform sandbox', 'app/test', false],
    ['benchmarks', 'app/bench', false],
    ['the compiler (a dev dependency)', 'app/node_modules/typescript', false],
    ['the test runner (a dev dependency)', 'app/node_modules/vitest', false],
  ])('%s (%s): in the image: %s', (_what, path, present) => {
    expect(existsSync(join(rootfs, path))).toBe(present);
  });

  it('migrates an empty database, gets ready, forwards an event to the sandbox, and drains on SIGTERM', async () => {
    const prefix = `${kit.groupPrefix}image-`;
    await kit.startGroupsAtEnd([
      { groupId: `${prefix}dedupe`, topic: Topics.eventsRaw },
      { groupId: `${prefix}enrich`, topic: Topics.eventsDeduped },
      { groupId: `${prefix}forwarder`, topic: Topics.conversionsReady },
    ]);
    const [port, metricsPort] = (await freePorts(2)) as [number, number];
    svc = startFromRootfs(rootfs, {
      ...sandboxServiceEnv(sandbox, port),
      HOST: '127.0.0.1',
      METRICS_PORT: String(metricsPort),
      ADMIN_TOKEN: TEST_ADMIN_TOKEN,
      KAFKA_BROKERS: infraEnv().KAFKA_BROKERS,
      SCHEMA_REGISTRY_URL: infraEnv().SCHEMA_REGISTRY_URL,
      DATABASE_URL: database.url,
      KAFKA_GROUP_PREFIX: prefix,
    });
    const url = `http://127.0.0.1:${port}`;
    const exited = new Promise<number | null>((resolve) => svc!.child.once('exit', (code) => resolve(code)));
    await eventually(
      "GET /readyz of the image's service answers 200",
      async () => {
        if (svc!.child.exitCode !== null) throw new Error(`the service exited with ${svc!.child.exitCode}`);
        return fetch(`${url}/readyz`).then((r) => r.status === 200, () => false);
      },
      90_000,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\n--- service output ---\n${svc!.output()}`);
    });

    const admin = adminClient(url, TEST_ADMIN_TOKEN);
    const ws = (await admin.createWorkspace('image')).id;
    const key = (await admin.createKey(ws, 'live')).key;
    expect((await admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, SETUP)).status).toBe(200);
    const started = await admin.call('POST', `/admin/v1/workspaces/${ws}/connection`);
    expect((await connectLikeABrowser(started.body.authorize_url)).status).toBe(200);

    const event = webEvent();
    const r = await fetch(`${url}/v1/events`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify([event]),
    });
    expect(r.status, await r.text()).toBe(202);
    const forwarded = await eventually(
      'the event forwarded to the sandbox',
      async () => (await receivedBySandbox(sandbox)).find((e) => e.record.event === 'CompletePayment'),
      60_000,
    );
    expect(forwarded.record.event_id).toBeTruthy();

    svc.child.kill('SIGTERM');
    expect(await exited, svc.output()).toBe(0);
    // Nothing was written outside DATA_DIR and /tmp: the root filesystem was mounted read-only throughout.
    expect(svc.output()).not.toMatch(/EROFS|read-only file system/i);
  }, 240_000);
});
