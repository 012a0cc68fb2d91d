/**
 * Random choices a failing run can repeat: the seed comes from TEST_SEED or is drawn, and is printed with the
 * test's name, so `TEST_SEED=<seed> npx vitest run <file>` makes the same choices again.
 */
import { randomInt } from 'node:crypto';
import { uniformInt } from 'pure-rand/distribution/uniformInt';
import { xoroshiro128plus } from 'pure-rand/generator/xoroshiro128plus';

export interface SeededRandom {
  readonly seed: number;
  /** An integer in [min, max], both included. */
  int(min: number, max: number): number;
  pick<T>(items: readonly T[]): T;
}

export function seededRandom(testName: string, env: NodeJS.ProcessEnv = process.env): SeededRandom {
  const given = env.TEST_SEED;
  if (given !== undefined && !/^\d{1,9}$/.test(given)) throw new Error(`TEST_SEED must be an integer of at most 9 digits, got ${given}`);
  const seed = given === undefined ? randomInt(1_000_000_000) : Number(given);
  process.stdout.write(`${testName}: random seed ${seed} (repeat with TEST_SEED=${seed})\n`);
  const rng = xoroshiro128plus(seed);
  return {
    seed,
    int: (min, max) => uniformInt(rng, min, max),
    pick: (items) => {
      if (items.length === 0) throw new Error('pick from an empty list');
      return items[uniformInt(rng, 0, items.length - 1)]!;
    },
  };
}
