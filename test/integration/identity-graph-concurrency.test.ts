/**
 * On Kafka several enrich consumers update one workspace's identity graph at once (different partitions, one
 * Postgres). Linking reads clusters and then merges them; the enrich stage takes the graph's lock for its whole batch
 * transaction (identity/graph-repo.ts), so concurrent batches never merge from stale reads. Real Postgres, real
 * concurrency: each "partition" runs its batches in transactions of its own, all partitions at once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeIdOf } from '../../services/enrich/identity/graph-repo.js';
import { createEnrichProcessor } from '../../services/enrich/processor.js';
import { envelopeKey, type EventEnvelope } from '../../services/shared/envelope.js';
import { silentLogger } from '../../services/shared/logger.js';
import { Topics } from '../../services/shared/topics.js';
import { KafkaEventLog } from '../../services/stream/kafka/log.js';
import { KafkaStageRunner } from '../../services/stream/kafka/runner.js';
import { freshDatabase, infraEnv, kafkaKit, uniqueId, waitFor } from '../helpers/infra.js';
import { processAll } from '../helpers/stage-harness.js';

let database: Awaited<ReturnType<typeof freshDatabase>>;
beforeAll(async () => {
  database = await freshDatabase(infraEnv().DATABASE_URL);
});
afterAll(() => database?.drop());

function envelope(i: number, a: string, b: string, workspaceId = 'ws_race'): EventEnvelope {
  return {
    v: 1,
    workspace_id: workspaceId,
    key_mode: 'live',
    api_key_id: 'key_1',
    request_id: `req-${i}`,
    index: 0,
    received_at: Date.now(),
    endpoint: 'events',
    api_version: '2026-11-01',
    idempotency_key: `k-${i}`,
    dedupe: { key: `k-${i}`, scope: 'event' },
    source: 'SERVER',
    name: 'page_view',
    consent: { analytics_storage: 'GRANTED', ad_storage: 'GRANTED', ad_user_data: 'GRANTED', ad_personalization: 'GRANTED' },
    identifiers: [
      { kind: 'user_id', value: a },
      { kind: 'client_id', value: b },
    ],
    session: null,
    payload: {},
  };
}

describe('identity graph under concurrent consumers', () => {
  it('a chain of links made concurrently ends in one cluster', async () => {
    const { db } = database;
    // Event i links user u<i> with client c<i>, and event i' links client c<i> with user u<i+1>: a chain that only
    // becomes one cluster if every merge sees the merges before it.
    const n = 24;
    const events: EventEnvelope[] = [];
    for (let i = 0; i < n; i++) {
      events.push(envelope(2 * i, `u${i}`, `c${i}`));
      events.push(envelope(2 * i + 1, `u${i + 1}`, `c${i}`));
    }
    // Six partitions, each a sequence of batches of 3, all at once: links of one chain land in concurrent batches.
    const partitions = Array.from({ length: 6 }, (_, p) => events.filter((_, i) => i % 6 === p));
    const stage = createEnrichProcessor({ maxClusterIdentifiers: 1000 });
    const outcomes = await Promise.all(partitions.map((list) => processAll(db, stage, list, { batchSize: 3 })));
    expect(outcomes.flat().every((o) => o.type === 'drop' && o.reason === 'no_forwarding_setup')).toBe(true);
    const ids = [...Array(n + 1).keys()].map((i) => nodeIdOf({ workspaceId: 'ws_race', keyMode: 'live' }, { kind: 'user_id', value: `u${i}` }));
    const r = await db.query<{ cluster_id: string }>('SELECT DISTINCT cluster_id FROM identity_nodes WHERE node_id = ANY($1::text[])', [ids]);
    expect(r.rows).toHaveLength(1);
  });
});

describe('identity graph through the Kafka runner', () => {
  it('three enrich consumers of one group, on every partition at once: a chain of links ends in one cluster', async () => {
    const kit = await kafkaKit(infraEnv());
    const log = new KafkaEventLog(kit.connection, kit.serde, kit.admin, silentLogger);
    const runners: KafkaStageRunner<unknown, never>[] = [];
    try {
      const ws = uniqueId('ws_krace');
      const name = uniqueId('enrich-race-');
      const groupId = kit.connection.groupId(name);
      await kit.startGroupsAtEnd([{ groupId, topic: Topics.eventsDeduped }]);
      // The real enrich stage under its own group name, three members: the group spreads the partitions over them.
      const stage = { ...createEnrichProcessor({ maxClusterIdentifiers: 1000 }), name };
      for (let i = 0; i < 3; i++) {
        runners.push(
          new KafkaStageRunner({
            connection: kit.connection,
            serde: kit.serde,
            admin: kit.admin,
            sql: database.db,
            processor: stage,
            options: { logger: silentLogger, partitionsConsumedConcurrently: 2 },
          }),
        );
      }
      for (const r of runners) await r.start();
      await waitFor('every member owns prepared partitions', async () => runners.every((r) => r.readyPartitions().length > 0), 60_000, 200);

      const n = 30;
      const events: EventEnvelope[] = [];
      for (let i = 0; i < n; i++) {
        events.push(envelope(2 * i, `u${i}`, `c${i}`, ws));
        events.push(envelope(2 * i + 1, `u${i + 1}`, `c${i}`, ws));
      }
      // Keyed by idempotency key: the links of one chain land on every partition, processed by all three members.
      await log.append(Topics.eventsDeduped, events.map((e) => ({ key: envelopeKey(e), value: e })), Date.now() + 10_000);
      const upTo = await kit.ends(Topics.eventsDeduped);
      await waitFor('the group drained events.deduped', () => kit.drained(groupId, Topics.eventsDeduped, upTo), 90_000, 200);

      const ids = [...Array(n + 1).keys()].map((i) => nodeIdOf({ workspaceId: ws, keyMode: 'live' }, { kind: 'user_id', value: `u${i}` }));
      const r = await database.db.query<{ cluster_id: string }>('SELECT DISTINCT cluster_id FROM identity_nodes WHERE node_id = ANY($1::text[])', [ids]);
      expect(r.rows).toHaveLength(1);
      const members = await database.db.query<{ n: number }>('SELECT count(*)::int AS n FROM identity_nodes WHERE cluster_id = $1', [r.rows[0]!.cluster_id]);
      expect(Number(members.rows[0]!.n)).toBe(2 * n + 1);
    } finally {
      for (const r of runners) await r.stop();
      await log.close();
      await kit.close();
    }
  });
});
