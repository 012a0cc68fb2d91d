/**
 * The gateway's log on Kafka (KafkaEventLog): append() resolves once the broker acknowledged (the records are then on
 * events.raw, read_committed, exactly as appended), concurrent appends share sends, an append past its deadline is
 * rejected with NotDurableError and never written, and an unreachable broker means 503 inside the deadline and
 * healthy() false.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventEnvelope } from '../../services/domain/envelope.js';
import { KafkaAdmin } from '../../services/shared/kafka/admin.js';
import { KafkaConnection } from '../../services/shared/kafka/client.js';
import { silentLogger } from '../../services/shared/logger.js';
import { registry } from '../../services/shared/metrics.js';
import { KafkaEventLog } from '../../services/stream/kafka/log.js';
import { NotDurableError } from '../../services/stream/log.js';
import { Topics } from '../../services/shared/topics.js';
import { webEvent } from '../helpers/factories.js';
import { fromA, keyed } from '../helpers/envelopes.js';
import { infraEnv, kafkaKit, uniqueId, type KafkaKit } from '../helpers/infra.js';
import { freePort } from '../sandbox/ports.js';

let kit: KafkaKit;
let log: KafkaEventLog;

beforeAll(async () => {
  kit = await kafkaKit(infraEnv());
  log = new KafkaEventLog(kit.connection, kit.serde, kit.admin, silentLogger);
});
afterAll(async () => {
  await log?.close();
  await kit?.close();
});

const envelopes = (ws: string, keys: readonly string[]): EventEnvelope[] =>
  keys.flatMap((k) => fromA([webEvent({ event_metadata: { idempotency_key: k } })], { workspaceId: ws, receivedAt: Date.now() }));

const sends = async (): Promise<number> =>
  ((await registry.getSingleMetric('kafka_produce_duration_seconds')!.get()).values.find(
    (v) => v.metricName === 'kafka_produce_duration_seconds_count' && v.labels.producer === 'gateway',
  )?.value ?? 0);

async function onRaw(ws: string, from: ReadonlyMap<number, bigint>): Promise<Array<{ key: string; value: EventEnvelope; partition: number }>> {
  return (await kit.read<EventEnvelope>(Topics.eventsRaw, from)).filter((r) => r.value.workspace_id === ws);
}

/** A deadline no loaded machine misses, for appends that are meant to succeed. */
const ROOMY_MS = 30_000;

describe('KafkaEventLog', () => {
  it('resolves after the broker acknowledged; the records are on events.raw as appended, keyed workspace:key', async () => {
    const ws = uniqueId('ws_log');
    const from = await kit.ends(Topics.eventsRaw);
    const list = envelopes(ws, ['a', 'b', 'c']);
    await log.append(Topics.eventsRaw, list.map(keyed), Date.now() + ROOMY_MS);
    const raw = await onRaw(ws, from);
    expect(raw.map((r) => r.key).sort()).toEqual([`${ws}:a`, `${ws}:b`, `${ws}:c`]);
    for (const r of raw) expect(r.value).toStrictEqual(list.find((e) => `${ws}:${e.idempotency_key}` === r.key));
  });

  it('sends concurrent appends together, and a key always to the same partition', async () => {
    const ws = uniqueId('ws_batch');
    const from = await kit.ends(Topics.eventsRaw);
    const before = await sends();
    const list = envelopes(ws, Array.from({ length: 200 }, (_, i) => `k${i % 100}`));
    await Promise.all(list.map((e) => log.append(Topics.eventsRaw, [keyed(e)], Date.now() + ROOMY_MS)));
    expect((await sends()) - before).toBeLessThan(40);
    const raw = await onRaw(ws, from);
    expect(raw).toHaveLength(200);
    const partitionOf = new Map<string, Set<number>>();
    for (const r of raw) partitionOf.set(r.key, (partitionOf.get(r.key) ?? new Set()).add(r.partition));
    expect([...partitionOf.values()].every((ps) => ps.size === 1)).toBe(true);
  });

  it('rejects an append whose deadline passed before it was sent, and never writes it', async () => {
    const ws = uniqueId('ws_late');
    const from = await kit.ends(Topics.eventsRaw);
    // A linger far longer than the deadline: the append is still queued when its deadline passes, however slow the
    // machine is to get there.
    const slow = new KafkaEventLog(kit.connection, kit.serde, kit.admin, silentLogger, { lingerMs: 3_000 });
    const late = slow.append(Topics.eventsRaw, envelopes(ws, ['late']).map(keyed), Date.now() + 50);
    await expect(late).rejects.toBeInstanceOf(NotDurableError);
    await slow.append(Topics.eventsRaw, envelopes(ws, ['after']).map(keyed), Date.now() + ROOMY_MS);
    await slow.close();
    expect((await onRaw(ws, from)).map((r) => r.value.idempotency_key)).toEqual(['after']);
  });

  it('is healthy while the broker answers', async () => {
    expect(await log.healthy()).toBe(true);
  });
});

describe('bad input and an unreachable broker', () => {
  it('answers NotDurableError inside the deadline and healthy() false when no broker listens', async () => {
    const dead = new KafkaConnection({ brokers: [`127.0.0.1:${await freePort()}`] }, silentLogger);
    const admin = new KafkaAdmin(dead, { retries: 0 });
    const unreachable = new KafkaEventLog(dead, kit.serde, admin, silentLogger);
    const started = Date.now();
    await expect(unreachable.append(Topics.eventsRaw, envelopes('ws_dead', ['x']).map(keyed), Date.now() + 1_500)).rejects.toBeInstanceOf(NotDurableError);
    // Answered by the deadline, not by the client's own connection retries; the slack is for a loaded machine.
    expect(Date.now() - started).toBeLessThan(1_500 + 3_000);
    expect(await unreachable.healthy()).toBe(false);
    await unreachable.close();
    await admin.close();
  });

  it('rejects appends after close with NotDurableError', async () => {
    const closed = new KafkaEventLog(kit.connection, kit.serde, kit.admin, silentLogger);
    await closed.close();
    await expect(closed.append(Topics.eventsRaw, envelopes('ws_closed', ['x']).map(keyed), Date.now() + 1_500)).rejects.toBeInstanceOf(NotDurableError);
    expect(await closed.healthy()).toBe(false);
  });

  it('refuses a value that does not fit the schema as a bug (not as a 503)', async () => {
    const bad = { ...envelopes('ws_bad', ['x'])[0]!, key_mode: 'staging' };
    let error: unknown;
    try {
      await log.append(Topics.eventsRaw, [{ key: 'ws_bad:x', value: bad }], Date.now() + 1_500);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(NotDurableError);
  });
});
