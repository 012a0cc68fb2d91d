/**
 * The delivery records' statements on both databases the service runs on: Postgres (the Kafka runtime's, and the
 * embedded one's with DATABASE_URL) and PGlite (the embedded default). Written, listed with every filter and paged,
 * marked dead, joined to their dead letters for a redrive, erased and purged, the same on each.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Attempt } from '../../services/forwarder/destinations/deliver.js';
import type { Outgoing } from '../../services/forwarder/destinations/kind.js';
import { DeliveryRepo } from '../../services/forwarder/delivery-repo.js';
import { deadLetterExpired } from '../../services/forwarder/outbox-repo.js';
import { deliveriesStep } from '../../services/privacy/erasure-steps.js';
import type { PlatformEventRecord } from '../../services/domain/conversion.js';
import type { Db } from '../../services/shared/db/db.js';
import { openDatabase } from '../../services/shared/db/open.js';
import { conversion } from '../helpers/forwarder-rig.js';
import { freshDatabase, infraEnv } from '../helpers/infra.js';

const ANN = 'a'.repeat(64);
const BOB = 'b'.repeat(64);
const WS = 'ws_deliveries';

function attempt(eventId: string, outcome: Attempt<Outgoing>['outcome'], email: string, message = 'OK'): Attempt<Outgoing> {
  const record = { ...conversion(WS, { event_id: eventId }).record, user: { email: [email], ttclid: 'T' } } as PlatformEventRecord;
  return {
    row: { eventId, record },
    payload: record,
    match: { keys: ['ttclid', 'email'], quality: 6.5 },
    outcome,
    answer: { http_status: 200, code: outcome === 'refused' ? 40002 : 0, message, request_id: 'r1' },
  };
}

describe.each([
  ['Postgres', async () => freshDatabase(infraEnv().DATABASE_URL)],
  ['PGlite', async () => ({ db: await openDatabase({ inMemory: true }), drop: async () => undefined })],
])('delivery records on %s', (_name, open) => {
  let db: Db;
  let drop: () => Promise<void>;
  let repo: DeliveryRepo;
  beforeAll(async () => {
    const opened = await open();
    db = opened.db;
    drop = opened.drop;
    repo = new DeliveryRepo(db);
    const target = { workspaceId: WS, destinationId: 'tiktok', kind: 'tiktok' } as const;
    await repo.record(target, [attempt('e1', 'sent', ANN), attempt('e2', 'retrying', BOB), attempt('e3', 'refused', ANN, 'data[0].event: unknown')]);
    await repo.record(target, [attempt('e2', 'sent', BOB)]);
    await repo.record({ workspaceId: WS, destinationId: 'dst_m', kind: 'meta' }, [attempt('e1', 'retrying', ANN)]);
  });
  afterAll(async () => {
    await db?.close();
    await drop?.();
  });

  it('keeps the latest attempt per event and destination, counting attempts', async () => {
    const all = await repo.list(WS, {}, { limit: 10 });
    expect(all.map((d) => `${d.destination} ${d.eventId} ${d.outcome} ${d.attempts}`)).toEqual([
      'dst_m e1 retrying 1',
      'tiktok e3 refused 1',
      'tiktok e2 sent 2',
      'tiktok e1 sent 1',
    ]);
    const e3 = all.find((d) => d.eventId === 'e3')!;
    expect(e3).toMatchObject({ kind: 'tiktok', matchKeys: ['ttclid', 'email'], matchQuality: 6.5, platformAnswer: { code: 40002, message: 'data[0].event: unknown' }, sentAt: null });
    expect(all.find((d) => d.eventId === 'e2')!.sentAt).not.toBeNull();
  });

  it('filters and pages', async () => {
    const ids = async (f: Parameters<DeliveryRepo['list']>[1]) => (await repo.list(WS, f, { limit: 10 })).map((d) => `${d.destination} ${d.eventId}`);
    expect(await ids({ destination: 'dst_m' })).toEqual(['dst_m e1']);
    expect(await ids({ outcome: 'sent' })).toEqual(['tiktok e2', 'tiktok e1']);
    expect(await ids({ eventId: 'e1' })).toEqual(['dst_m e1', 'tiktok e1']);
    expect(await ids({ from: Date.now() - 60_000, to: Date.now() + 60_000 })).toHaveLength(4);
    expect(await ids({ to: Date.now() - 60_000 })).toEqual([]);
    const first = await repo.list(WS, {}, { limit: 3 });
    const rest = await repo.list(WS, {}, { beforeId: first.at(-1)!.id, limit: 3 });
    expect([...first, ...rest].map((d) => d.id)).toEqual((await repo.list(WS, {}, { limit: 10 })).map((d) => d.id));
  });

  it('finds the refused ones with a waiting dead letter, and marks them requeued', async () => {
    await db.query(
      `INSERT INTO dead_letters (id, workspace_id, stage, topic, origin, source, event_id, reason, value, first_failed_at, last_failed_at)
       VALUES ('dl_1', $1, 'forwarder', 'conversions.dlq', 'e3', 's', 'e3', 'platform_rejected', '{}'::jsonb, now(), now())`,
      [WS],
    );
    expect(await repo.redrivable(WS, { filter: { outcome: 'refused' } })).toEqual([{ deliveryId: expect.any(Number), letterId: 'dl_1' }]);
    expect(await repo.redrivable(WS, { eventIds: ['e1', 'e2'] })).toEqual([]);
    const [picked] = await repo.redrivable(WS, { eventIds: ['e3'] });
    await repo.markRequeued([picked!.deliveryId]);
    expect((await repo.list(WS, { eventId: 'e3' }, { limit: 1 }))[0]!.outcome).toBe('retrying');
  });

  it('marks dropped ones dead (never a sent one) with their dead letters, erases a person\'s, purges old ones', async () => {
    const expired = (destinationId: string) => ({
      workspaceId: WS,
      destinationId,
      eventId: 'e1',
      record: conversion(WS, { event_id: 'e1' }).record,
      eventSource: 'WEB',
      eventSourceId: 'P',
      testEventCode: '',
      sourceEvent: 'purchase',
    });
    await db.transaction((tx) => deadLetterExpired(tx, [expired('dst_m'), expired('tiktok')], Date.now()));
    const outcomes = async () => (await repo.list(WS, {}, { limit: 10 })).map((d) => `${d.destination} ${d.eventId} ${d.outcome}`);
    expect(await outcomes()).toEqual(['dst_m e1 dead', 'tiktok e3 retrying', 'tiktok e2 sent', 'tiktok e1 sent']);
    // Only the one that turned dead has a letter, under the destination's origin: the deliveries redrive finds it.
    const letters = await db.query<{ id: string; origin: string; reason: string; error: string }>("SELECT id, origin, reason, error FROM dead_letters WHERE workspace_id = $1 AND reason = 'expired'", [WS]);
    expect(letters.rows).toEqual([{ id: expect.any(String), origin: 'dst_m:e1', reason: 'expired', error: expect.stringMatching(/^destination dst_m: not delivered within FORWARDER_PARK_MAX_HOURS; last answer: 0 OK/) }]);
    expect(await repo.redrivable(WS, { eventIds: ['e1'] })).toEqual([{ deliveryId: expect.any(Number), letterId: letters.rows[0]!.id }]);
    const removed = await db.transaction((tx) =>
      deliveriesStep.run(tx, { erasureId: 'er_1', workspaceId: WS, requestedAt: Date.now(), nodes: [{ kind: 'email_sha256', value: ANN }] }),
    );
    expect(removed).toBe(3);
    expect(await outcomes()).toEqual(['tiktok e2 sent']);
    await db.query(`UPDATE deliveries SET attempted_at = now() - interval '10 days' WHERE workspace_id = $1`, [WS]);
    expect(await repo.purge(7 * 86_400_000)).toBe(1);
    expect(await outcomes()).toEqual([]);
  });
});
