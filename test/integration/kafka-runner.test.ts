/**
 * The Kafka stage runner on the real broker: exactly once across a consumer killed with SIGKILL in the middle of its
 * work and a consumer added (rebalance), the dedupe store restored from its changelog by a new process, poison
 * records dead-lettered with their reason, and the store bounded by its retention (evicted keys tombstoned).
 * The stages run in child processes (fixtures/stage-process.mjs) where a test kills them; the topics are read
 * read_committed, as the next stage reads them.
 */
import diagnostics from 'node:diagnostics_channel';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createDedupeProcessor, DEDUPE_STAGE } from '../../services/dedupe/processor.js';
import type { EventEnvelope } from '../../services/domain/envelope.js';
import { GroupConsumer } from '../../services/shared/kafka/consumer.js';
import { IdempotentProducer, ProducerFencedError, TransactionalProducer, type GroupMember } from '../../services/shared/kafka/producer.js';
import { silentLogger } from '../../services/shared/logger.js';
import { KafkaEventLog } from '../../services/stream/kafka/log.js';
import { KafkaStageRunner, STAGE_GROUP_HEADER } from '../../services/stream/kafka/runner.js';
import { readTopicRaw, type ReadRecord } from '../../services/stream/kafka/reader.js';
import { drop, ok, perRecord, type DeadLetter, type Stage } from '../../services/stream/contract.js';
import { Topics } from '../../services/shared/topics.js';
import { webEvent } from '../helpers/factories.js';
import { fromA, keyed } from '../helpers/envelopes.js';
import { freshDatabase, infraEnv, kafkaKit, tally, uniqueId, waitFor, type KafkaKit } from '../helpers/infra.js';
import { killAll, spawnStage } from './fixtures/processes.js';

let kit: KafkaKit;
let log: KafkaEventLog;
let database: Awaited<ReturnType<typeof freshDatabase>>;

beforeAll(async () => {
  kit = await kafkaKit(infraEnv());
  log = new KafkaEventLog(kit.connection, kit.serde, kit.admin, silentLogger);
  database = await freshDatabase(infraEnv().DATABASE_URL);
});
afterEach(killAll);
afterAll(async () => {
  await killAll();
  await log?.close();
  await kit?.close();
  await database?.drop();
});

/** Envelopes of one workspace with these idempotency keys (one request each, received now). */
function envelopes(workspaceId: string, keys: readonly string[]): EventEnvelope[] {
  return keys.flatMap((k) => fromA([webEvent({ event_metadata: { idempotency_key: k } })], { workspaceId, receivedAt: Date.now() }));
}

async function produce(list: readonly EventEnvelope[]): Promise<void> {
  for (let i = 0; i < list.length; i += 200) {
    await log.append(Topics.eventsRaw, list.slice(i, i + 200).map(keyed), Date.now() + 10_000);
  }
}

/** events.deduped records of a workspace's envelopes with these idempotency keys, as a transaction sends them. */
function dedupedRecords(ws: string, keys: readonly string[]) {
  return [{ topic: Topics.eventsDeduped, records: envelopes(ws, keys).map((e) => ({ ...keyed(e), value: kit.serde.encode(Topics.eventsDeduped, e) })) }];
}

/**
 * The idempotency keys of the workspace on events.deduped since `from`, read_committed (as the next stage reads).
 * The commit markers reach the partitions after EndTxn answers, so a read right after a commit may not see the last
 * record yet: read until `last` shows (or 15 s), then the caller requires exactly what it expects.
 */
async function keysReadOnceShown(ws: string, from: Awaited<ReturnType<KafkaKit['ends']>>, last: string): Promise<string[]> {
  const read = async (): Promise<string[]> =>
    (await kit.read<EventEnvelope>(Topics.eventsDeduped, from)).filter((r) => r.value.workspace_id === ws).map((r) => r.value.idempotency_key!);
  let seen: string[] = [];
  await waitFor(`the record ${last}`, async () => (seen = await read()).includes(last), 15_000, 250).catch(() => undefined);
  return seen;
}

/** The group has committed events.raw up to its end as it is now (after the test's records). */
async function drainedNow(groupId: string): Promise<() => Promise<boolean>> {
  const upTo = await kit.ends(Topics.eventsRaw);
  return () => kit.drained(groupId, Topics.eventsRaw, upTo);
}

/** A group prefix of the test's own (each test's stage is a new consumer group, started at the end of the topics). */
async function stageGroup(stage: string): Promise<{ prefix: string; groupId: string }> {
  const prefix = `${kit.groupPrefix}${uniqueId('t')}-`;
  const groupId = `${prefix}${stage}`;
  await kit.startGroupsAtEnd([{ groupId, topic: Topics.eventsRaw }]);
  return { prefix, groupId };
}

/** Idempotency keys of a workspace's records written by one stage (group): other groups may share the topic. */
const keysOf = (records: ReadonlyArray<ReadRecord<EventEnvelope>>, ws: string, groupId: string): string[] =>
  records.filter((r) => r.value.workspace_id === ws && r.headers[STAGE_GROUP_HEADER] === groupId).map((r) => r.value.idempotency_key!);

describe('exactly once on Kafka', () => {
  it('a consumer killed -9 mid-batch and a consumer added: every first-seen event once, no duplicate', async () => {
    const ws = uniqueId('ws_kill');
    const { prefix, groupId } = await stageGroup(DEDUPE_STAGE);
    const fromDeduped = await kit.ends(Topics.eventsDeduped);
    const unique = Array.from({ length: 1200 }, (_, i) => `k${i}`);
    const repeats = unique.filter((_, i) => i % 3 === 0); // duplicates, later in the stream

    const env = { ...infraEnv(), DATABASE_URL: database.url };
    // Slow processors (4 ms per record) committing every 50 records: the kill lands between and inside transactions.
    const slow = { DELAY_MS: '4', DELAY_WORKSPACE: ws, BATCH: '50' };
    const a = spawnStage(env, prefix, slow);
    const b = spawnStage(env, prefix, slow);
    await waitFor('both consumers own partitions', async () => a.status().ready.length > 0 && b.status().ready.length > 0, 60_000);
    // First wave: 800 keys and duplicates of some of them. Its first 400 go 100 at a time, until A is processing (and
    // owns partitions at that moment: a rebalance leaves `ready` empty for a while); the rest at once, so that A has
    // work left when it is killed. Sent whole at the start, the wave could all go to B: a rebalance right after the
    // start (a member's first commit meeting a newer generation) left B every partition while A rejoined and restored
    // its store (a CI run: A 19 records, B 981).
    const firstWave = [...unique.slice(0, 500), ...repeats.slice(0, 100), ...unique.slice(500, 800), ...repeats.slice(100, 200)];
    const aProcessing = (): boolean => a.status().records >= 100 && a.status().ready.length > 0;
    let sent = 0;
    while (sent < 400 && !aProcessing()) {
      await produce(envelopes(ws, firstWave.slice(sent, sent + 100)));
      sent += 100;
      await waitFor('A is processing', async () => aProcessing(), 3_000, 20).catch(() => undefined);
    }
    await produce(envelopes(ws, firstWave.slice(sent)));
    await waitFor('A is processing', async () => aProcessing(), 60_000, 20).catch((err: Error) => {
      throw new Error(`${err.message}: A ${JSON.stringify(a.status())}, B ${JSON.stringify(b.status())}\n--- A:\n${a.output().slice(-3000)}\n--- B:\n${b.output().slice(-3000)}`);
    });
    const aPartitions = a.status().ready;
    await a.kill();
    // A died with work left: some of its partitions are not fully committed.
    const [ends, committed] = await Promise.all([kit.admin.endOffsets(Topics.eventsRaw), kit.admin.committedOffsets(groupId, Topics.eventsRaw)]);
    expect(aPartitions.some((p) => (committed.get(p) ?? -1n) < ends.get(p)!.high), `A (${JSON.stringify(a.status())}) left no work:\n${a.output().slice(-2000)}`).toBe(true);
    // A consumer added while A's partitions are still held by its dead session: a rebalance in mid-stream.
    const c = spawnStage(env, prefix, slow);
    await waitFor('C owns partitions', async () => c.status().ready.length > 0, 60_000);
    // Second wave, spread over all partitions: new keys and duplicates of both waves.
    await produce(envelopes(ws, [...unique.slice(800), ...repeats.slice(200), ...unique.slice(0, 50)]));

    await waitFor('the stage drained events.raw', await drainedNow(groupId), 90_000, 250).catch((err: Error) => {
      throw new Error(`${err.message}\n--- B:\n${b.output().slice(-3000)}\n--- C:\n${c.output().slice(-3000)}`);
    });
    const out = await kit.read<EventEnvelope>(Topics.eventsDeduped, fromDeduped);
    const keys = keysOf(out, ws, groupId);
    const counts = tally(keys);
    expect([...counts].filter(([, n]) => n > 1)).toEqual([]);
    expect(new Set(keys)).toEqual(new Set(unique));
    expect(keys).toHaveLength(unique.length);
    // C processed part of the stream after the rebalance.
    expect(c.status().records).toBeGreaterThan(0);
    expect(await b.stop()).toBe(0);
    expect(await c.stop()).toBe(0);
  });

  it('a new process restores the dedupe store from the changelog before processing: earlier keys stay duplicates', async () => {
    const ws = uniqueId('ws_restore');
    const { prefix, groupId } = await stageGroup(DEDUPE_STAGE);
    const fromDeduped = await kit.ends(Topics.eventsDeduped);
    const fromState = await kit.ends(Topics.dedupeState);
    const first = Array.from({ length: 60 }, (_, i) => `r${i}`);
    await produce(envelopes(ws, first));
    const env = { ...infraEnv(), DATABASE_URL: database.url };
    const a = spawnStage(env, prefix);
    await waitFor('A drained events.raw', await drainedNow(groupId), 60_000, 200);
    expect(await a.stop()).toBe(0);

    const later = Array.from({ length: 25 }, (_, i) => `n${i}`);
    await produce(envelopes(ws, [...first, ...later]));
    const b = spawnStage(env, prefix);
    await waitFor('B drained events.raw', await drainedNow(groupId), 60_000, 200);
    expect(b.status().restored).toBeGreaterThanOrEqual(first.length);

    const keys = keysOf(await kit.read<EventEnvelope>(Topics.eventsDeduped, fromDeduped), ws, groupId);
    expect(keys.sort()).toEqual([...first, ...later].sort());
    // The changelog holds one first-seen marker per key, on the partition of the key's events.
    const state = (await kit.read<{ v: number; live?: { first_seen: number } }>(Topics.dedupeState, fromState)).filter(
      (r) => r.key.startsWith(`${ws}:`) && r.headers[STAGE_GROUP_HEADER] === groupId,
    );
    expect(new Set(state.map((r) => r.key))).toEqual(new Set([...first, ...later].map((k) => `${ws}:${k}`)));
    for (const r of state) expect(r.value).toMatchObject({ v: 1, live: { first_seen: expect.any(Number) } });
    expect(await b.stop()).toBe(0);
  });
});

describe('zombie fencing by transactional.id (a producer started again with its id)', () => {
  it('a newer producer with the same transactional.id aborts the zombie\'s open transaction; the zombie cannot commit', async () => {
    const ws = uniqueId('ws_zombie');
    const tid = `${kit.groupPrefix}${uniqueId('tid')}`;
    const groupId = `${kit.groupPrefix}${uniqueId('g')}`;
    const from = await kit.ends(Topics.eventsDeduped);
    const records = (keys: readonly string[]) => dedupedRecords(ws, keys);

    const zombie = new TransactionalProducer(kit.connection, tid);
    await zombie.init();
    await zombie.run(async (tx) => {
      await tx.send(records(['before-1', 'before-2']));
      await tx.sendOffsets(groupId, Topics.eventsRaw, [{ partition: 0, next: 5n }]);
    });

    // The zombie is in the middle of its next transaction (records written, not committed) when a newer producer
    // with its id starts: InitProducerId bumps the epoch and aborts the open transaction.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let sent!: () => void;
    const written = new Promise<void>((r) => (sent = r));
    const zombieRun = zombie.run(async (tx) => {
      await tx.send(records(['zombie-1', 'zombie-2']));
      sent();
      await gate;
      await tx.sendOffsets(groupId, Topics.eventsRaw, [{ partition: 0, next: 9n }]);
    });
    const outcome = zombieRun.then(() => 'committed', (err: unknown) => err);
    await written;
    const successor = new TransactionalProducer(kit.connection, tid);
    await successor.init();
    release();
    const zombieError = await outcome;
    expect(zombieError, `the zombie's run ended with: ${zombieError instanceof Error ? (zombieError.stack ?? zombieError.message) : String(zombieError)}`).toBeInstanceOf(ProducerFencedError);

    await successor.run(async (tx) => {
      await tx.send(records(['after-1']));
      await tx.sendOffsets(groupId, Topics.eventsRaw, [{ partition: 0, next: 7n }]);
    });
    await zombie.close();
    await successor.close();

    // read_committed (as the next stage reads): the zombie's open transaction never shows; the offsets are the
    // successor's, not the zombie's.
    const seen = await keysReadOnceShown(ws, from, 'after-1');
    expect(seen.sort()).toEqual(['after-1', 'before-1', 'before-2']);
    expect((await kit.admin.committedOffsets(groupId, Topics.eventsRaw)).get(0)).toBe(7n);
    await kit.admin.deleteGroups([groupId]);
  });
});

type Generations = Array<{ readonly who: string; readonly member: GroupMember }>;

/** The Kafka client's requests of this process, by API key, while `work` runs (the client's diagnostics channel). */
async function requestsDuring(work: () => Promise<void>): Promise<Map<number, number>> {
  const requests = new Map<number, number>();
  const count = (m: unknown): void => {
    const key = (m as { apiKey: number }).apiKey;
    requests.set(key, (requests.get(key) ?? 0) + 1);
  };
  diagnostics.subscribe('tracing:plt:kafka:connections:api:start', count);
  try {
    await work();
  } finally {
    diagnostics.unsubscribe('tracing:plt:kafka:connections:api:start', count);
  }
  return requests;
}

/** A member of the group on events.raw that reads nothing (every partition paused), noting each generation it joins. */
async function idleMember(groupId: string, who: string, generations: Generations): Promise<GroupConsumer> {
  const c = new GroupConsumer(kit.connection, {
    groupId,
    topics: [Topics.eventsRaw],
    onAssigned: (_assignment, m) => void generations.push({ who, member: m }),
    onBatch: async () => undefined,
  });
  await c.start();
  c.pause(Topics.eventsRaw, [...Array(8).keys()]);
  return c;
}

describe('zombie fencing by group generation (KIP-447: one transactional producer per member)', () => {
  it('a member whose group moved to a newer generation cannot commit offsets; its records never show; the current generation can', async () => {
    const ws = uniqueId('ws_gen');
    const groupId = `${kit.groupPrefix}${uniqueId('gen')}`;
    const from = await kit.ends(Topics.eventsDeduped);
    const records = (keys: readonly string[]) => dedupedRecords(ws, keys);
    const generations: Generations = [];
    const a = await idleMember(groupId, 'a', generations);
    const old = generations.find((g) => g.who === 'a')!.member;
    // A second member joins: the group moves to a newer generation (a's client rejoins it by itself).
    const b = await idleMember(groupId, 'b', generations);
    await waitFor('a newer generation', async () => generations.some((g) => g.member.generationId > old.generationId), 30_000, 100);

    const zombie = new TransactionalProducer(kit.connection, `${kit.groupPrefix}${uniqueId('tid')}`);
    await zombie.init();
    const outcome = await zombie
      .run(async (tx) => {
        await tx.send(records(['zombie-1']));
        await tx.sendOffsets(groupId, Topics.eventsRaw, [{ partition: 0, next: 9n }, { partition: 1, next: 9n }], old);
      })
      .then(() => 'committed', (err: unknown) => err);
    expect(outcome, 'the offsets of the older generation were accepted').toBeInstanceOf(Error);
    await zombie.close();

    const current = generations.filter((g) => g.who === 'b').at(-1)!.member;
    const live = new TransactionalProducer(kit.connection, `${kit.groupPrefix}${uniqueId('tid')}`);
    await live.init();
    // Every partition's offset in one TxnOffsetCommit.
    const requests = await requestsDuring(() =>
      live.run(async (tx) => {
        await tx.send(records(['live-1']));
        await tx.sendOffsets(groupId, Topics.eventsRaw, [0, 1, 2].map((partition) => ({ partition, next: 7n + BigInt(partition) })), current);
      }),
    );
    const TXN_OFFSET_COMMIT = 28;
    expect(requests.get(TXN_OFFSET_COMMIT)).toBe(1);
    await live.close();
    await a.stop();
    await b.stop();

    const seen = await keysReadOnceShown(ws, from, 'live-1');
    expect(seen).toEqual(['live-1']);
    const committed = await kit.admin.committedOffsets(groupId, Topics.eventsRaw);
    expect([0, 1, 2].map((p) => committed.get(p))).toEqual([7n, 8n, 9n]);
    await kit.admin.deleteGroups([groupId]);
  });
});

describe('offsets committed without a transaction (chunks that produce nothing): fenced by the generation too', () => {
  it("an older generation's commit is refused and changes nothing; the current generation's is kept", async () => {
    const groupId = `${kit.groupPrefix}${uniqueId('plain')}`;
    const generations: Generations = [];
    const a = await idleMember(groupId, 'a', generations);
    const old = generations.find((g) => g.who === 'a')!.member;
    await a.commitOffsets(old, Topics.eventsRaw, [{ partition: 0, next: 3n }]);
    expect((await kit.admin.committedOffsets(groupId, Topics.eventsRaw)).get(0)).toBe(3n);

    const b = await idleMember(groupId, 'b', generations);
    await waitFor('a newer generation', async () => generations.some((g) => g.member.generationId > old.generationId), 30_000, 100);
    // The zombie's commit, through a client that has joined the newer generation itself: refused, not retried in it.
    const outcome = await a.commitOffsets(old, Topics.eventsRaw, [{ partition: 0, next: 9n }]).then(() => 'committed', (err: unknown) => err);
    expect(outcome, 'the offsets of the older generation were accepted').toBeInstanceOf(Error);
    expect((await kit.admin.committedOffsets(groupId, Topics.eventsRaw)).get(0)).toBe(3n);

    const current = generations.filter((g) => g.who === 'b').at(-1)!.member;
    await b.commitOffsets(current, Topics.eventsRaw, [{ partition: 0, next: 7n }]);
    await a.stop();
    await b.stop();
    expect((await kit.admin.committedOffsets(groupId, Topics.eventsRaw)).get(0)).toBe(7n);
    await kit.admin.deleteGroups([groupId]);
  });
});

describe('the runner in this process: poison records, bytes passed on, retention, chunks in flight', () => {
  let runner: KafkaStageRunner<unknown, unknown> | undefined;
  afterAll(async () => {
    await runner?.stop();
  });

  it('dead-letters a record that always throws and an undecodable one, with the reason; the rest passes', async () => {
    const ws = uniqueId('ws_poison');
    const name = uniqueId('poison-');
    const inner = createDedupeProcessor({ windowMs: 3_600_000 });
    const poison: Stage<unknown, any> = {
      ...inner,
      name,
      async processBatch(records, ctx) {
        if (records.some((r) => (r.value as EventEnvelope).idempotency_key === 'bad')) throw new Error('cannot handle this');
        return inner.processBatch(records, ctx);
      },
    };
    const groupId = kit.connection.groupId(name);
    await kit.startGroupsAtEnd([{ groupId, topic: Topics.eventsRaw }]);
    const fromDlq = await kit.ends(Topics.eventsDlq);
    const fromDeduped = await kit.ends(Topics.eventsDeduped);
    const list = envelopes(ws, ['p1', 'bad', 'p2']);
    await produce(list);
    // Garbage on the key of p1 (same partition): not Avro at all.
    const raw = new IdempotentProducer({ clientId: 'test-raw', brokers: kit.connection.settings.brokers });
    await raw.send([{ topic: Topics.eventsRaw, records: [{ key: `${ws}:p1`, value: Buffer.from('{"not":"avro"}') }] }]);
    await raw.close();

    runner = new KafkaStageRunner({ connection: kit.connection, serde: kit.serde, admin: kit.admin, sql: database.db, processor: poison, options: { logger: silentLogger } });
    await runner.start();
    await waitFor('the poison stage drained events.raw', await drainedNow(groupId), 60_000, 200);
    await runner.stop();
    runner = undefined;

    const letters = (await kit.read<DeadLetter>(Topics.eventsDlq, fromDlq)).filter((r) => r.value.stage === name);
    expect(letters.map((l) => l.value.reason).sort()).toEqual(['processing_failed', 'undecodable']);
    const failed = letters.find((l) => l.value.reason === 'processing_failed')!.value;
    expect(failed).toMatchObject({ stage: name, error: 'cannot handle this', source_topic: Topics.eventsRaw, key: `${ws}:bad` });
    expect(failed.value).toEqual(list[1]);
    const undecodable = letters.find((l) => l.value.reason === 'undecodable')!.value;
    expect(undecodable).toMatchObject({ key: `${ws}:p1`, value: { undecodable_base64: Buffer.from('{"not":"avro"}').toString('base64') } });
    expect(keysOf(await kit.read<EventEnvelope>(Topics.eventsDeduped, fromDeduped), ws, groupId).sort()).toEqual(['p1', 'p2']);
  });

  it('a stage that produces nothing commits its offsets with OffsetCommit, never a transaction', async () => {
    const ws = uniqueId('ws_quiet');
    const name = uniqueId('quiet-');
    // Drops every record (its work would be in its database).
    const quiet: Stage<unknown> = { name, input: Topics.eventsRaw, processBatch: async (records) => records.map(() => drop('not_selected')) };
    const groupId = kit.connection.groupId(name);
    await kit.startGroupsAtEnd([{ groupId, topic: Topics.eventsRaw }]);
    await produce(envelopes(ws, Array.from({ length: 30 }, (_, i) => `q${i}`)));
    const requests = await requestsDuring(async () => {
      runner = new KafkaStageRunner({ connection: kit.connection, serde: kit.serde, admin: kit.admin, sql: database.db, processor: quiet, options: { logger: silentLogger, maxBatchRecords: 10 } });
      await runner.start();
      await waitFor('the quiet stage committed events.raw to its end', await drainedNow(groupId), 60_000, 200);
      await runner.stop();
      runner = undefined;
    });
    const [OFFSET_COMMIT, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT] = [8, 25, 26, 28];
    expect(requests.get(OFFSET_COMMIT) ?? 0).toBeGreaterThan(0);
    expect([ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT].map((k) => requests.get(k) ?? 0)).toEqual([0, 0, 0]);
  });

  it('passes an input it forwards unchanged on as its bytes (dedupe), and encodes what it changes', async () => {
    const ws = uniqueId('ws_bytes');
    const name = uniqueId('bytes-');
    const inner = createDedupeProcessor({ windowMs: 3_600_000 });
    // The same envelope passed on (dedupe), and a copy with one field changed: only the copy is encoded again.
    const stage: Stage<unknown, any> = {
      ...inner,
      name,
      async processBatch(records, ctx) {
        const outcomes = await inner.processBatch(records, ctx);
        return outcomes.map((o) =>
          o.type === 'ok' && (o.outputs[0]!.value as EventEnvelope).idempotency_key === 'changed'
            ? ok({ ...o.outputs[0]!, value: { ...(o.outputs[0]!.value as EventEnvelope), name: 'renamed' } })
            : o,
        );
      },
    };
    const groupId = kit.connection.groupId(name);
    await kit.startGroupsAtEnd([{ groupId, topic: Topics.eventsRaw }]);
    const fromRaw = await kit.ends(Topics.eventsRaw);
    const fromDeduped = await kit.ends(Topics.eventsDeduped);
    await produce(envelopes(ws, ['same', 'changed']));
    runner = new KafkaStageRunner({ connection: kit.connection, serde: kit.serde, admin: kit.admin, sql: database.db, processor: stage, options: { logger: silentLogger } });
    await runner.start();
    await waitFor('the stage drained events.raw', await drainedNow(groupId), 60_000, 200);
    await runner.stop();
    runner = undefined;

    const mine = async (topic: typeof Topics.eventsRaw | typeof Topics.eventsDeduped, from: Map<number, bigint>) => {
      const raw = await readTopicRaw(kit.connection, kit.admin, topic, { from });
      const out = new Map<string, Buffer>();
      for (const r of raw) {
        const e = (await kit.serde.decode(topic, r.value!)) as EventEnvelope;
        if (e.workspace_id === ws && (topic === Topics.eventsRaw || r.headers[STAGE_GROUP_HEADER] === groupId)) out.set(e.idempotency_key!, r.value!);
      }
      return out;
    };
    const input = await mine(Topics.eventsRaw, fromRaw);
    const output = await mine(Topics.eventsDeduped, fromDeduped);
    expect([...output.keys()].sort()).toEqual(['changed', 'same']);
    expect(output.get('same')!.equals(input.get('same')!)).toBe(true);
    expect(output.get('changed')!.equals(input.get('changed')!)).toBe(false);
    expect(((await kit.serde.decode(Topics.eventsDeduped, output.get('changed')!)) as EventEnvelope).name).toBe('renamed');
  });

  it('evicts store entries older than the retention and tombstones them on the changelog', async () => {
    const ws = uniqueId('ws_evict');
    const name = uniqueId('evict-');
    const retentionMs = 1_500;
    const remember = perRecord<unknown, { v: 1; live: { first_seen: number; request_id: string } }>({
      name,
      input: Topics.eventsRaw,
      store: { name, changelog: Topics.dedupeState, retentionMs },
      async process(record, ctx) {
        const e = record.value as EventEnvelope;
        if (e.workspace_id !== ws) return drop('other workspace');
        if (await ctx.store.get(record.key)) return drop('seen');
        await ctx.store.put(record.key, { v: 1, live: { first_seen: e.received_at, request_id: e.request_id } });
        return ok();
      },
    });
    const groupId = kit.connection.groupId(name);
    await kit.startGroupsAtEnd([{ groupId, topic: Topics.eventsRaw }]);
    const fromState = await kit.ends(Topics.dedupeState);
    const old = envelopes(ws, ['e1', 'e2', 'e3']);
    runner = new KafkaStageRunner({ connection: kit.connection, serde: kit.serde, admin: kit.admin, sql: database.db, processor: remember, options: { logger: silentLogger } });
    await runner.start();
    await produce(old);
    await waitFor('the first keys are stored', await drainedNow(groupId), 60_000, 200);
    // The wait is what is under test: the stored entries age past the retention.
    await new Promise((r) => setTimeout(r, retentionMs + 200));
    // Later records on every partition make each partition's next transaction evict what expired there.
    await produce(envelopes(ws, Array.from({ length: 60 }, (_, i) => `later${i}`)));
    await waitFor('the later keys are processed', await drainedNow(groupId), 60_000, 200);
    await runner.stop();
    runner = undefined;

    const changelog = (await kit.read(Topics.dedupeState, fromState)).filter(
      (r) => ['e1', 'e2', 'e3'].some((k) => r.key === `${ws}:${k}`) && r.headers[STAGE_GROUP_HEADER] === groupId,
    );
    const byKey = new Map<string, unknown[]>();
    for (const r of changelog) byKey.set(r.key, [...(byKey.get(r.key) ?? []), r.value]);
    expect([...byKey.keys()].sort()).toEqual(['e1', 'e2', 'e3'].map((k) => `${ws}:${k}`));
    for (const values of byKey.values()) {
      expect(values).toHaveLength(2);
      expect(values[0]).toMatchObject({ v: 1, live: { request_id: expect.any(String) } });
      expect(values[1]).toBeNull(); // the tombstone
    }
  });

  it('a chunk processed while the one before it commits reads its writes: a counter per partition misses no record', async () => {
    const ws = uniqueId('ws_count');
    const name = uniqueId('count-');
    type Count = { v: 1; live: { first_seen: number; request_id: string } };
    // Every record adds one to its partition's counter. Chunks of 5 records: a batch is many chunks, each read while
    // the one before it is still committing; a read of the committed store alone would lose counts.
    const counter = perRecord<unknown, Count>({
      name,
      input: Topics.eventsRaw,
      store: { name, changelog: Topics.dedupeState },
      async process(record, ctx) {
        if ((record.value as EventEnvelope).workspace_id !== ws) return drop('other workspace');
        const key = `${ws}:count`;
        const n = (await ctx.store.get(key))?.live.first_seen ?? 0;
        await ctx.store.put(key, { v: 1, live: { first_seen: n + 1, request_id: record.offset } });
        return drop('counted');
      },
    });
    const groupId = kit.connection.groupId(name);
    await kit.startGroupsAtEnd([{ groupId, topic: Topics.eventsRaw }]);
    const fromRaw = await kit.ends(Topics.eventsRaw);
    const fromState = await kit.ends(Topics.dedupeState);
    await produce(envelopes(ws, Array.from({ length: 400 }, (_, i) => `c${i}`)));
    runner = new KafkaStageRunner({
      connection: kit.connection, serde: kit.serde, admin: kit.admin, sql: database.db, processor: counter,
      options: { logger: silentLogger, maxBatchRecords: 5 },
    });
    await runner.start();
    await waitFor('the stage drained events.raw', await drainedNow(groupId), 60_000, 200);
    await runner.stop();
    runner = undefined;

    const perPartition = new Map<number, number>();
    for (const r of await kit.read<EventEnvelope>(Topics.eventsRaw, fromRaw)) {
      if (r.value.workspace_id === ws) perPartition.set(r.partition, (perPartition.get(r.partition) ?? 0) + 1);
    }
    const counted = new Map<number, number>();
    for (const r of await kit.read<Count>(Topics.dedupeState, fromState)) {
      if (r.key === `${ws}:count` && r.headers[STAGE_GROUP_HEADER] === groupId) counted.set(r.partition, r.value.live.first_seen);
    }
    expect(perPartition.size).toBeGreaterThan(1);
    expect(counted).toEqual(perPartition);
  });
});

describe('bad input', () => {
  it('a processor without a store that touches ctx.store dead-letters the record instead of stopping the stage', async () => {
    const ws = uniqueId('ws_nostore');
    const name = uniqueId('nostore-');
    const careless = perRecord<unknown, unknown>({
      name,
      input: Topics.eventsRaw,
      async process(record, ctx) {
        if ((record.value as EventEnvelope).workspace_id !== ws) return drop('other workspace');
        await ctx.store.get('x');
        return ok();
      },
    });
    const groupId = kit.connection.groupId(name);
    await kit.startGroupsAtEnd([{ groupId, topic: Topics.eventsRaw }]);
    const fromDlq = await kit.ends(Topics.eventsDlq);
    const r = new KafkaStageRunner({ connection: kit.connection, serde: kit.serde, admin: kit.admin, sql: database.db, processor: careless, options: { logger: silentLogger } });
    await r.start();
    await produce(envelopes(ws, ['only']));
    await waitFor('drained', await drainedNow(groupId), 60_000, 200);
    await r.stop();
    const letters = (await kit.read<DeadLetter>(Topics.eventsDlq, fromDlq)).filter((l) => l.value.stage === name);
    expect(letters.map((l) => [l.value.reason, l.value.error])).toEqual([['processing_failed', 'this stage has no state store']]);
  });
});
