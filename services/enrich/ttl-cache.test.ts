import { describe, expect, it } from 'vitest';
import { TtlCache } from './ttl-cache.js';

/** A cache on a hand-moved clock, and a loader that records what it was asked for. */
function rig(ttlMs: number, maxEntries?: number) {
  let now = 1_000_000;
  const calls: string[][] = [];
  const cache = new TtlCache<string | null>(ttlMs, maxEntries, () => now);
  const values = new Map([['a', 'A'], ['b', 'B'], ['c', 'C']]);
  const read = (keys: readonly string[]) =>
    cache.getMany(
      keys,
      async (missing) => {
        calls.push(missing);
        return new Map(missing.filter((k) => values.has(k)).map((k) => [k, values.get(k)!]));
      },
      null,
    );
  return { read, calls, values, advance: (ms: number) => (now += ms) };
}

describe('TtlCache', () => {
  it('loads the missing keys in one call, each key once', async () => {
    const { read, calls } = rig(1_000);
    expect(await read(['a', 'b', 'a', 'x'])).toEqual(new Map([['a', 'A'], ['b', 'B'], ['x', null]]));
    expect(calls).toEqual([['a', 'b', 'x']]);
  });

  it('answers from memory within the TTL, the absent value included', async () => {
    const { read, calls } = rig(1_000);
    await read(['a', 'x']);
    const again = await read(['a', 'x']);
    expect(again).toEqual(new Map([['a', 'A'], ['x', null]]));
    expect(calls).toHaveLength(1);
  });

  it('sees a change once the TTL has passed', async () => {
    const { read, calls, values, advance } = rig(1_000);
    await read(['a']);
    values.set('a', 'A2');
    advance(999);
    expect((await read(['a'])).get('a')).toBe('A');
    advance(2);
    expect((await read(['a'])).get('a')).toBe('A2');
    expect(calls).toEqual([['a'], ['a']]);
  });

  it('loads only the keys it does not hold', async () => {
    const { read, calls } = rig(1_000);
    await read(['a']);
    await read(['a', 'b']);
    expect(calls).toEqual([['a'], ['b']]);
  });

  it('caches nothing with a TTL of 0', async () => {
    const { read, calls } = rig(0);
    await read(['a']);
    await read(['a']);
    expect(calls).toEqual([['a'], ['a']]);
  });

  it('at its bound forgets the least recently used key, not everything', async () => {
    const { read, calls } = rig(60_000, 2);
    await read(['a', 'b']);
    await read(['a']); // a is now more recent than b
    await read(['c']);
    await read(['a', 'c']);
    expect(calls).toEqual([['a', 'b'], ['c']]);
    await read(['b']);
    expect(calls.at(-1)).toEqual(['b']);
  });

  it('loads nothing for no keys', async () => {
    const { read, calls } = rig(1_000);
    expect(await read([])).toEqual(new Map());
    expect(calls).toEqual([]);
  });
});
