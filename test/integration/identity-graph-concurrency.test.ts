/**
 * On Kafka several enrich members share the partitions of events.deduped, which is keyed by the identity graph
 * (workspace and key mode): one partition owns a graph, so its merges never start from a stale read, with no lock.
 * Three members, a chain of links that only becomes one cluster if every merge sees the merges before it, and the
 * graph sink writing the queryable tables from the changes enrich emits.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeIdOf } from '../../services/enrich/identity/graph-repo.js';
import { createEnrichProcessor } from '../../services/enrich/processor.js';
import { graphOwnerKey, type EventEnvelope } from '../../services/domain/envelope.js';
import { silentLogger } from '../../services/shared/logger.js';
import { Topics } from '../../services/shared/topics.js';
import { KafkaEventLog } from '../../services/stream/kafka/log.js';
import { KafkaStageRunner } from '../../services/stream/kafka/runner.js';
import { freshDatabase, infraEnv, kafkaKit, uniqueId, waitFor } from '../helpers/infra.js';
import { createGraphSinkStage } from '../../services/enrich/identity/graph-sink.js';

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

describe('identity graph through the Kafka runner', () => {
  it('three enrich consumers of one group, on every partition at once: a chain of links ends in one cluster', async () => {
    const kit = await kafkaKit(infraEnv());
    const log = new KafkaEventLog(kit.connection, kit.serde, kit.admin, silentLogger);
    const runners: Array<KafkaStageRunner<unknown, any>> = [];
    try {
      const ws = uniqueId('ws_krace');
      const name = uniqueId('enrich-race-');
      const groupId = kit.connection.groupId(name);
      const sinkName = uniqueId('graph-sink-');
      await kit.startGroupsAtEnd([
        { groupId, topic: Topics.eventsDeduped },
        { groupId: kit.connection.groupId(sinkName), topic: Topics.identityChanges },
      ]);
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
      const sink = new KafkaStageRunner({
        connection: kit.connection,
        serde: kit.serde,
        admin: kit.admin,
        sql: database.db,
        processor: { ...createGraphSinkStage(), name: sinkName },
        options: { logger: silentLogger },
      });
      for (const r of runners) await r.start();
      await sink.start();
      runners.push(sink);
      await waitFor('every member owns prepared partitions', async () => runners.every((r) => r.readyPartitions().length > 0), 60_000, 200);

      const n = 30;
      const events: EventEnvelope[] = [];
      for (let i = 0; i < n; i++) {
        events.push(envelope(2 * i, `u${i}`, `c${i}`, ws));
        events.push(envelope(2 * i + 1, `u${i + 1}`, `c${i}`, ws));
      }
      // Keyed by the graph, as dedupe writes them: the partition that owns the graph has every link, in order.
      await log.append(Topics.eventsDeduped, events.map((e) => ({ key: graphOwnerKey(e), value: e })), Date.now() + 10_000);
      const ids = [...Array(n + 1).keys()].map((i) => nodeIdOf({ workspaceId: ws, keyMode: 'live' }, { kind: 'user_id', value: `u${i}` }));
      const r = await waitFor(
        'the graph sink wrote one cluster of every user',
        async () => {
          const q = await database.db.query<{ cluster_id: string; n: number }>(
            'SELECT cluster_id, count(*)::int AS n FROM identity_nodes WHERE node_id = ANY($1::text[]) GROUP BY cluster_id',
            [ids],
          );
          return q.rows.length === 1 && Number(q.rows[0]!.n) === n + 1 ? q : undefined;
        },
        90_000,
        200,
      );
      const members = await database.db.query<{ n: number }>('SELECT count(*)::int AS n FROM identity_nodes WHERE cluster_id = $1', [r.rows[0]!.cluster_id]);
      expect(Number(members.rows[0]!.n)).toBe(2 * n + 1);
    } finally {
      for (const r of runners) await r.stop();
      await log.close();
      await kit.close();
    }
  });
});
