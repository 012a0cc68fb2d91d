import { describe, expect, it } from 'vitest';
import { seededRandom } from './seeded-random.js';

describe('seededRandom', () => {
  it('repeats the same choices for the same TEST_SEED, and draws a seed when none is given', () => {
    const draw = (env: NodeJS.ProcessEnv) => {
      const r = seededRandom('seeded-random test', env);
      return { seed: r.seed, ints: Array.from({ length: 20 }, () => r.int(200, 500)), picks: Array.from({ length: 5 }, () => r.pick(['a', 'b', 'c'])) };
    };
    const a = draw({ TEST_SEED: '12345' });
    expect(draw({ TEST_SEED: '12345' })).toEqual(a);
    expect(a.seed).toBe(12345);
    expect(a.ints.every((n) => Number.isInteger(n) && n >= 200 && n <= 500)).toBe(true);
    expect(draw({ TEST_SEED: '12346' }).ints).not.toEqual(a.ints);
    const drawn = draw({});
    expect(Number.isInteger(drawn.seed)).toBe(true);
    expect(draw({ TEST_SEED: String(drawn.seed) })).toEqual(drawn);
  });

  describe('bad input', () => {
    it.each(['', 'abc', '-1', '1.5', '1234567890'])('TEST_SEED=%j is refused', (seed) => {
      expect(() => seededRandom('seeded-random test', { TEST_SEED: seed })).toThrow(/TEST_SEED must be an integer/);
    });
    it('pick from an empty list throws', () => {
      expect(() => seededRandom('seeded-random test', { TEST_SEED: '1' }).pick([])).toThrow(/empty/);
    });
  });
});
