import { describe, expect, it } from 'vitest';
import { bySize, toMessages } from './producer.js';

const record = (n: number, bytes: number) => ({ key: `k${n}`, value: Buffer.alloc(bytes, n % 256), headers: { 'stage-group': 'g' } });

describe('a transaction\'s records cut into sends under the broker\'s record-batch limit', () => {
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
