/** The dedupe processor on the embedded runtime: outputs, state and offset in one transaction; retention purge. */
import { describe, expect, it, vi } from 'vitest';
import { inMemoryLog } from '../../test/helpers/embedded-log.js';
import { silentLogger } from '../shared/logger.js';
import { registry } from '../shared/metrics.js';
import { EmbeddedLog } from '../stream/embedded/log.js';
import { EmbeddedStageRunner } from '../stream/embedded/runner.js';
import { purgeStore } from '../stream/embedded/table-store.js';
import type { InputRecord, Stage } from '../stream/contract.js';
import { Topics } from '../shared/topics.js';
import { webEvent } from '../../test/helpers/factories.js';
import { DAY, fromA, keyed } from '../../test/helpers/envelopes.js';
import { createDedupeProcessor } from './processor.js';

const mem = inMemoryLog();

const rows = async (topic: string) =>
  (await mem.db.query<{ key: string; value: any }>('SELECT key, value FROM log_records WHERE topic = $1 ORDER BY "offset"', [topic])).rows;

const counter = async (stage: string, outcome: string, reason: string): Promise<number> => {
  const m = (await registry.getSingleMetric('stage_records_total')!.get()).values;
  return m.filter((v) => v.labels.stage === stage && v.labels.outcome === outcome && v.labels.reason === reason).reduce((s, v) => s + v.value, 0);
};

describe('dedupe on the embedded runner', () => {
  it('writes first-seen envelopes to events.deduped once each, counts duplicates, and survives a failed batch', async () => {
    const inner = createDedupeProcessor({ windowMs: 7 * DAY });
    // Fails the first time a batch holds run-c: the attempt rolls back whole and the batch is bisected.
    let failed = false;
    const flaky: Stage<unknown, any> = {
      ...inner,
      name: 'dedupe-flaky',
      async processBatch(records, ctx) {
        if (!failed && records.some((r: InputRecord<any>) => r.value.idempotency_key === 'run-c')) {
          failed = true;
          throw new Error('injected');
        }
        return inner.processBatch(records, ctx);
      },
    };
    const events = fromA(
      ['a', 'b', 'c', 'a', 'd', 'b'].map((k) => webEvent({ event_metadata: { idempotency_key: `run-${k}` } })),
      { workspaceId: 'ws_runner' },
    );
    await mem.log.append(Topics.eventsRaw, events.map(keyed), Date.now() + 10_000);
    const runner = new EmbeddedStageRunner(mem.db, mem.log, flaky, { logger: silentLogger });
    expect(await runner.drain()).toBe(6);
    expect(failed).toBe(true);
    const out = await rows(Topics.eventsDeduped);
    expect(out.map((r) => r.value.idempotency_key)).toEqual(['run-a', 'run-b', 'run-c', 'run-d']);
    // Keyed by the identity graph the events feed (enrich's partition-local state).
    expect(out.map((r) => r.key)).toEqual(['ws_runner:live', 'ws_runner:live', 'ws_runner:live', 'ws_runner:live']);
    expect(await counter('dedupe-flaky', 'drop', 'duplicate')).toBe(2);
    expect(await counter('dedupe-flaky', 'ok', '')).toBe(4);
    // A restarted runner (fresh instance, as after a crash) resumes from the committed offset: nothing twice.
    expect(await new EmbeddedStageRunner(mem.db, mem.log, flaky, { logger: silentLogger }).drain()).toBe(0);
  });

  it('dead-letters a record that fails alone, with the stage and the reason, and moves on', async () => {
    const inner = createDedupeProcessor({ windowMs: 7 * DAY });
    const poison: Stage<unknown, any> = {
      ...inner,
      name: 'dedupe-poison',
      async processBatch(records, ctx) {
        if (records.some((r: InputRecord<any>) => r.value.idempotency_key === 'poison')) throw new Error('cannot handle this');
        return inner.processBatch(records, ctx);
      },
    };
    const before = (await rows(Topics.eventsDlq)).length;
    const events = fromA(['p1', 'poison', 'p2'].map((k) => webEvent({ event_metadata: { idempotency_key: k } })), { workspaceId: 'ws_poison' });
    await mem.log.append(Topics.eventsRaw, events.map(keyed), Date.now() + 10_000);
    await new EmbeddedStageRunner(mem.db, mem.log, poison, { logger: silentLogger }).drain();
    const dlq = (await rows(Topics.eventsDlq)).slice(before);
    expect(dlq).toHaveLength(1);
    expect(dlq[0]!.value).toMatchObject({ stage: 'dedupe-poison', reason: 'processing_failed', error: 'cannot handle this' });
    expect(dlq[0]!.value.value.idempotency_key).toBe('poison');
    const deduped = (await rows(Topics.eventsDeduped)).map((r) => r.value.idempotency_key);
    expect(deduped).toEqual(expect.arrayContaining(['p1', 'p2']));
    expect(await counter('dedupe-poison', 'dlq', 'processing_failed')).toBe(1);
  });

  it('does not dead-letter good records when the database itself is down: it fails the batch and retries later', async () => {
    const inner = createDedupeProcessor({ windowMs: 7 * DAY });
    const proc = { ...inner, name: 'dedupe-dbdown' };
    const events = fromA([webEvent()], { workspaceId: 'ws_down' });
    await mem.log.append(Topics.eventsRaw, events.map(keyed), Date.now() + 10_000);
    const down: Db = {
      kind: mem.db.kind,
      query: (text, params) => (text === 'SELECT 1' ? Promise.reject(new Error('connection lost')) : mem.db.query(text, params)),
      transaction: () => Promise.reject(new Error('connection lost')),
      close: () => Promise.resolve(),
    };
    const before = (await rows(Topics.eventsDlq)).length;
    await expect(new EmbeddedStageRunner(down, mem.log, proc, { logger: silentLogger }).step()).rejects.toThrow('connection lost');
    expect((await rows(Topics.eventsDlq)).length).toBe(before);
    // Once the database is back, the same records go through.
    expect(await new EmbeddedStageRunner(mem.db, mem.log, proc, { logger: silentLogger }).drain()).toBeGreaterThan(0);
    expect((await rows(Topics.eventsDlq)).length).toBe(before);
  });

  it('purges store entries older than the retention (bounded storage), and only those', async () => {
    await mem.db.query(`INSERT INTO state_store (store, key, value, updated_at) VALUES
      ('purge-test', 'old', '{}', now() - interval '8 days'), ('purge-test', 'new', '{}', now() - interval '6 days'),
      ('other-store', 'old', '{}', now() - interval '30 days')`);
    expect(await purgeStore(mem.db, 'purge-test', 7 * DAY, 1)).toBe(1);
    const left = await mem.db.query<{ store: string; key: string }>(
      "SELECT store, key FROM state_store WHERE store IN ('purge-test', 'other-store') ORDER BY store, key",
    );
    expect(left.rows).toEqual([{ store: 'other-store', key: 'old' }, { store: 'purge-test', key: 'new' }]);
  });

  it('the running loop purges its own store on start', async () => {
    const proc = { ...createDedupeProcessor({ windowMs: 7 * DAY }), name: 'dedupe-purging' };
    await mem.db.query(`INSERT INTO state_store (store, key, value, updated_at) VALUES ('dedupe', 'ancient', '{}', now() - interval '9 days')`);
    const runner = new EmbeddedStageRunner(mem.db, mem.log, proc, { logger: silentLogger, idleWaitMs: 20 });
    await runner.start();
    try {
      await vi.waitFor(
        async () => expect((await mem.db.query("SELECT 1 FROM state_store WHERE store = 'dedupe' AND key = 'ancient'")).rows).toHaveLength(0),
        { timeout: 30_000, interval: 20 },
      );
    } finally {
      await runner.stop();
    }
  });
});
