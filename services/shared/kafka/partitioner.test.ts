import { compatibilityPartitioner } from '@platformatic/kafka';
import { describe, expect, it } from 'vitest';
import { keyPartitioner, murmur2 } from './partitioner.js';

describe("Kafka's default partitioning of keys, in 32-bit arithmetic", () => {
  it("gives the Java client's murmur2 (its own test vectors)", () => {
    const cases: Array<[string, number]> = [
      ['21', -973932308],
      ['foobar', -790332482],
      ['a-little-bit-long-string', -985981536],
      ['a-little-bit-longer-string', -1486304829],
      ['lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971],
      ['abc', 479470107],
    ];
    for (const [key, hash] of cases) expect(murmur2(Buffer.from(key)), key).toBe(hash);
  });

  it("partitions every key as the Kafka client's compatibility partitioner does (every tail length, UTF-8, empty)", () => {
    const keys = ['', 'a', 'ab', 'abc', 'abcd', 'ws_1:ünïcødé-κλειδί', ...Array.from({ length: 2_000 }, (_, n) => `ws_${n % 7}:${'x'.repeat(n % 97)}${(n * 2654435761) % 1e9}`)];
    for (const key of keys) {
      const bytes = Buffer.from(key);
      expect(keyPartitioner(undefined, bytes), key).toBe(compatibilityPartitioner(undefined as never, bytes));
    }
    expect(keyPartitioner(undefined, undefined)).toBe(0);
  });
});
