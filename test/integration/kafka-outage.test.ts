/**
 * The broker stopped for 20 s in mid-stream (infra/local/kafka.sh stop / start, on a broker of this file's own) while
 * senders keep posting to the gateway: while it is down the gateway answers 503 (never 202), /readyz is 503 (on PORT
 * and METRICS_PORT) and dependency_up{dependency="kafka"} is 0; once it is back, every event answered 202 (before, during the stop, after)
 * reaches events.raw and passes dedupe exactly once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventEnvelope } from '../../services/domain/envelope.js';
import { Topics } from '../../services/shared/topics.js';
import { adminClient } from '../helpers/admin-client.js';
import { webEvent } from '../helpers/factories.js';
import { freshDatabase, infraEnv, kafkaKit, tally, waitFor, type InfraEnv, type KafkaKit } from '../helpers/infra.js';
import { TEST_ADMIN_TOKEN } from '../helpers/service-process.js';
import { startOwnBroker, type OwnBroker } from './fixtures/broker.js';
import { killAll, startKafkaService } from './fixtures/processes.js';

const OUTAGE_MS = 20_000;

let broker: OwnBroker;
let env: InfraEnv;
let kit: KafkaKit;
let database: Awaited<ReturnType<typeof freshDatabase>>;

beforeAll(async () => {
  // A broker of this file's own (same scripts as make infra-up): stopping it disturbs no other test or user.
  broker = await startOwnBroker();
  env = { ...infraEnv(), KAFKA_BROKERS: broker.brokers };
  kit = await kafkaKit(env);
  database = await freshDatabase(env.DATABASE_URL);
});
afterAll(async () => {
  await killAll();
  await kit?.close();
  await database?.drop();
  await broker?.destroy();
});

interface Attempt {
  readonly key: string;
  readonly sentAt: number;
  readonly answeredAt: number;
  readonly status: number;
}

describe('the broker down for 20 s', () => {
  it('answers 503 while it is down, never 202, and delivers everything it accepted once it is back', async () => {
    const prefix = `${kit.groupPrefix}outage-`;
    await kit.startGroupsAtEnd([{ groupId: `${prefix}dedupe`, topic: Topics.eventsRaw }]);
    const fromRaw = await kit.ends(Topics.eventsRaw);
    const fromDeduped = await kit.ends(Topics.eventsDeduped);
    const svc = await startKafkaService(env, { databaseUrl: database.url, groupPrefix: prefix, role: 'all' });
    const admin = adminClient(svc.url, TEST_ADMIN_TOKEN);
    const ws = (await admin.createWorkspace('outage')).id;
    const apiKey = (await admin.createKey(ws, 'live')).key;

    const attempts: Attempt[] = [];
    const readiness: Array<{ at: number; status: number }> = [];
    const kafkaUp: Array<{ at: number; value: number }> = [];
    const metricsReadiness: Array<{ at: number; status: number }> = [];
    let posting = true;
    let n = 0;
    const sender = async (): Promise<void> => {
      while (posting) {
        const key = `o-${n++}`;
        const sentAt = Date.now();
        let status = 0;
        try {
          const r = await fetch(`${svc.url}/v1/events`, {
            method: 'POST',
            headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
            body: JSON.stringify([webEvent({ event_metadata: { idempotency_key: key } })]),
          });
          await r.arrayBuffer();
          status = r.status;
        } catch {
          status = 0;
        }
        attempts.push({ key, sentAt, answeredAt: Date.now(), status });
        // The senders' pace (traffic, not a wait): a 503 comes back at once, and three senders must not spin on it.
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    const probe = async (): Promise<void> => {
      while (posting) {
        const r = await fetch(`${svc.url}/readyz`).catch(() => undefined);
        readiness.push({ at: Date.now(), status: r?.status ?? 0 });
        await r?.arrayBuffer();
        // The scrape-time probe an SRE's KafkaUnreachable alert reads.
        const m = await fetch(svc.metricsUrl.replace(/\/metrics$/, '/readyz')).catch(() => undefined);
        metricsReadiness.push({ at: Date.now(), status: m?.status ?? 0 });
        await m?.arrayBuffer();
        const metrics = await fetch(svc.metricsUrl).then((m) => m.text()).catch(() => '');
        const up = /^dependency_up\{dependency="kafka"\} (\d+)$/m.exec(metrics);
        if (up) kafkaUp.push({ at: Date.now(), value: Number(up[1]) });
        // The sampling period of the probe (not a wait for anything).
        await new Promise((r) => setTimeout(r, 250));
      }
    };
    const loops = [sender(), sender(), sender(), probe()];

    await waitFor('events accepted before the outage', async () => attempts.filter((a) => a.status === 202).length >= 30, 30_000);
    const stopBegan = Date.now();
    await broker.stop();
    const down = Date.now();
    // The outage's length is what is under test: the broker stays down OUTAGE_MS while the senders keep posting.
    await new Promise((r) => setTimeout(r, OUTAGE_MS - (down - stopBegan)));
    const startBegan = Date.now();
    await broker.start();
    await waitFor('events accepted after the outage', async () => attempts.filter((a) => a.status === 202 && a.sentAt > startBegan).length >= 30, 60_000);
    // Ready again within a bound: the first accepted events can come before the readiness probe (and the metrics'
    // dependency probe) has seen the broker back, so the last sample is read once they have.
    const readyAgain = (samples: ReadonlyArray<{ at: number; status: number }>) => samples.some((r) => r.at > startBegan && r.status === 200) && samples.at(-1)!.status === 200;
    await waitFor(
      '/readyz 200 on both ports and dependency_up 1 after the broker came back',
      async () => readyAgain(readiness) && readyAgain(metricsReadiness) && kafkaUp.at(-1)?.value === 1,
      30_000,
    );
    posting = false;
    await Promise.all(loops);

    // While the broker was down: every answer a 503, none a 202; /readyz said so too.
    const duringOutage = attempts.filter((a) => a.sentAt >= down && a.answeredAt <= startBegan);
    expect(duringOutage.length).toBeGreaterThan(20);
    expect(tally(duringOutage.map((a) => a.status))).toEqual(new Map([[503, duringOutage.length]]));
    expect(attempts.filter((a) => a.status === 202 && a.answeredAt > down && a.answeredAt <= startBegan)).toEqual([]);
    expect(readiness.filter((r) => r.at > down + 2_000 && r.at < startBegan).map((r) => r.status)).not.toContain(200);
    expect(readiness.filter((r) => r.at > down + 2_000 && r.at < startBegan).length).toBeGreaterThan(10);
    expect(readiness.at(-1)!.status).toBe(200);
    // The metrics port's /readyz gives the same answer.
    expect(metricsReadiness.filter((r) => r.at > down + 2_000 && r.at < startBegan).map((r) => r.status)).not.toContain(200);
    expect(metricsReadiness.filter((r) => r.at > down + 2_000 && r.at < startBegan).map((r) => r.status)).toContain(503);
    expect(metricsReadiness.at(-1)!.status).toBe(200);
    // dependency_up{dependency="kafka"}: 1 before, 0 while down (after the 1 s probe timeout), 1 again at the end.
    expect(kafkaUp.filter((u) => u.at < stopBegan).map((u) => u.value)).toContain(1);
    expect(kafkaUp.filter((u) => u.at > down + 2_000 && u.at < startBegan).map((u) => u.value)).toContain(0);
    expect(kafkaUp.filter((u) => u.at > down + 2_000 && u.at < startBegan).map((u) => u.value)).not.toContain(1);
    expect(kafkaUp.at(-1)!.value).toBe(1);
    expect(attempts.every((a) => a.status === 202 || a.status === 503)).toBe(true);

    // Everything accepted is on events.raw and passed dedupe exactly once.
    const accepted = new Set(attempts.filter((a) => a.status === 202).map((a) => a.key));
    const written = await kit.ends(Topics.eventsRaw);
    await waitFor('dedupe drained events.raw', () => kit.drained(`${prefix}dedupe`, Topics.eventsRaw, written), 60_000, 250).catch((err: unknown) => {
      // What the service logged since the broker came back: why a stage did not catch up.
      throw new Error(`${(err as Error).message}\nservice output (tail):\n${svc.output().slice(-6000)}`);
    });
    const raw = (await kit.read<EventEnvelope>(Topics.eventsRaw, fromRaw)).filter((r) => r.value.workspace_id === ws);
    const rawKeys = new Set(raw.map((r) => r.value.idempotency_key!));
    expect([...accepted].filter((k) => !rawKeys.has(k))).toEqual([]);
    for (const r of raw) expect(r.key).toBe(`${ws}:${r.value.idempotency_key}`);
    const deduped = (await kit.read<EventEnvelope>(Topics.eventsDeduped, fromDeduped)).filter((r) => r.value.workspace_id === ws);
    const counts = tally(deduped.map((r) => r.value.idempotency_key!));
    expect([...counts].filter(([, c]) => c > 1)).toEqual([]);
    expect([...accepted].filter((k) => !counts.has(k))).toEqual([]);

    expect(await svc.stop()).toBe(0);
  });
});
