import { describe, expect, it } from 'vitest';
import { MultipleErrors, NetworkError, ResponseError } from '@platformatic/kafka';
import { bySize, refusedForGeneration, toMessages } from './producer.js';

const record = (n: number, bytes: number) => ({ key: `k${n}`, value: Buffer.alloc(bytes, n % 256), headers: { 'stage-group': 'g' } });

describe('a transaction\'s records cut into sends under the broker\'s record-batch limit per topic', () => {
  it('keeps the order and every record, and no send passes the limit unless one record alone does', () => {
    const records = Array.from({ length: 50 }, (_, n) => record(n, n === 17 ? 5_000 : 300));
    const messages = toMessages([{ topic: 'events.deduped', records }]);
    const runs = bySize(messages, 2_000);
    expect(runs.flat().map((m) => m.key!.toString())).toEqual(records.map((r) => r.key));
    for (const run of runs) {
      const bytes = run.reduce((n, m) => n + m.value!.length, 0);
      if (run.length > 1) expect(bytes).toBeLessThanOrEqual(2_000);
    }
    expect(runs.find((r) => r.some((m) => m.key!.toString() === 'k17'))).toHaveLength(1);
    expect(runs.length).toBeGreaterThan(5);
  });

  it('bounds each topic in a send: several topics share a send, each keeping its own order', () => {
    const a = Array.from({ length: 20 }, (_, n) => record(n, 300));
    const b = Array.from({ length: 20 }, (_, n) => record(100 + n, 300));
    const runs = bySize(toMessages([{ topic: 'a', records: a }, { topic: 'b', records: b }]), 2_000);
    // 20 records of ~370 bytes per topic: 5 per send and topic, so 4 sends for both topics, not 8.
    expect(runs).toHaveLength(4);
    for (const topic of ['a', 'b']) {
      const list = topic === 'a' ? a : b;
      expect(runs.flat().filter((m) => m.topic === topic).map((m) => m.key!.toString())).toEqual(list.map((r) => r.key));
      for (const run of runs) {
        const bytes = run.filter((m) => m.topic === topic).reduce((n, m) => n + m.value!.length, 0);
        expect(bytes).toBeLessThanOrEqual(2_000);
      }
    }
  });

  it('one send when everything fits; none for nothing', () => {
    expect(bySize(toMessages([{ topic: 't', records: [record(1, 10), record(2, 10)] }]), 10_000)).toHaveLength(1);
    expect(bySize([], 10)).toEqual([]);
  });

  it('a tombstone keeps its null value, and a record its timestamp and explicit partition', () => {
    const [m] = toMessages([{ topic: 't', records: [{ key: 'gone', value: null, partition: 3, timestamp: 1_700_000_000_123 }] }]);
    expect(m).toMatchObject({ topic: 't', value: null, partition: 3, timestamp: 1_700_000_000_123n });
    expect(m!.key!.toString()).toBe('gone');
  });
});

describe('refusedForGeneration: offsets refused because the group moved on', () => {
  // The client's own errors, as it builds them from a response: error codes by partition path (22 ILLEGAL_GENERATION,
  // 27 REBALANCE_IN_PROGRESS, 25 UNKNOWN_MEMBER_ID, 47 INVALID_PRODUCER_EPOCH).
  const refusal = (code: number) => new ResponseError(28, 4, { '/topics/0/partitions/0': [code, null] }, {});

  it('an ILLEGAL_GENERATION or REBALANCE_IN_PROGRESS answer, also inside a wrapping error', () => {
    expect(refusedForGeneration(refusal(22))).toBe(true);
    expect(refusedForGeneration(refusal(27))).toBe(true);
    expect(refusedForGeneration(new MultipleErrors('the transaction failed', [refusal(22)]))).toBe(true);
  });

  it('not a fenced producer, an unknown member, a network error or an error that is not the client\'s', () => {
    expect(refusedForGeneration(refusal(47))).toBe(false);
    expect(refusedForGeneration(refusal(25))).toBe(false);
    expect(refusedForGeneration(new NetworkError('connection closed'))).toBe(false);
    expect(refusedForGeneration(new Error('ILLEGAL_GENERATION'))).toBe(false);
    expect(refusedForGeneration(undefined)).toBe(false);
  });
});
