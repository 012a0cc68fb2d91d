/** The Kafka runtime's per-partition store: restore, transactions and forks, retention and what it owes tombstones. */
import { describe, expect, it } from 'vitest';
import { PartitionStore, PendingOverlay } from './store.js';

const HOUR = 3600_000;

describe('PartitionStore', () => {
  it('restores the changelog: the last record of a key wins, a tombstone removes it', () => {
    const s = new PartitionStore<number>(undefined);
    s.restore('a', 1, 0, 10);
    s.restore('b', 2, 1, 10);
    s.restore('a', 3, 2, 10);
    s.restore('b', null, 3, 10);
    expect(s.read('a')).toBe(3);
    expect(s.read('b')).toBeUndefined();
    expect(s.size).toBe(1);
  });

  it('shows a transaction its own writes at once and the store only after apply', async () => {
    const s = new PartitionStore<string>(undefined);
    s.restore('k', 'old', 0, 0);
    const tx = s.begin();
    await tx.put('k', 'new');
    tx.delete('gone');
    expect(await tx.get('k')).toBe('new');
    expect(s.read('k')).toBe('old');
    s.apply(tx, 5);
    expect(s.read('k')).toBe('new');
    expect([...tx.changes()]).toEqual([['k', 'new'], ['gone', null]]);
  });

  it('packs committed values beyond the hot ones: a packed read answers an equal copy, expiry keeps write order', async () => {
    type Summary = { members: Array<{ value: string; last_seen_at: number }>; into: string | null };
    const s = new PartitionStore<Summary>({ ms: HOUR }, 1);
    s.restore('c', { members: [{ value: 'a', last_seen_at: 1 }], into: null }, 100, 200);
    // Restored entries are packed: every read parses a fresh copy.
    expect(s.read('c')).toEqual({ members: [{ value: 'a', last_seen_at: 1 }], into: null });
    expect(s.read('c')).not.toBe(s.read('c'));

    const tx = s.begin();
    const written = { members: [{ value: 'a', last_seen_at: 1 }, { value: 'b', last_seen_at: 2 }], into: null };
    await tx.put('c', written);
    s.apply(tx, 300);
    // The latest write is hot: the store answers the value the batch wrote.
    expect(s.read('c')).toBe(written);

    const next = s.begin();
    await next.put('d', { members: [], into: 'c' });
    s.apply(next, 400);
    // One hot entry at most: 'c' is packed now, equal to what was written, and no longer shared with the writer.
    expect(s.read('d')).toEqual({ members: [], into: 'c' });
    expect(s.read('c')).toEqual(written);
    expect(s.read('c')).not.toBe(written);
    written.into = 'changed after the commit' as never;
    expect(s.read('c')!.into).toBeNull();
    // Write times survive packing: 'c' (written at 300) expires before 'd' (400).
    expect(s.expired(300 + HOUR - 1, 10)).toEqual([]);
    expect(s.expired(300 + HOUR, 10)).toEqual(['c']);
    expect(s.expired(400 + HOUR, 10)).toEqual(['c', 'd']);
  });

  it('keeps no more than its hot bound unpacked, whatever the writes', async () => {
    const s = new PartitionStore<{ n: number }>(undefined, 3);
    const values: Array<{ n: number }> = [];
    for (let n = 0; n < 10; n++) {
      const tx = s.begin();
      const v = { n };
      values.push(v);
      await tx.put(`k${n % 5}`, v);
      if (n === 7) tx.delete('k0');
      s.apply(tx, n);
    }
    // Keys k0..k4 last written with n = 5..9 (k0 deleted at 7); the three latest writes are hot.
    expect(s.read('k0')).toBeUndefined();
    expect([1, 2, 3, 4].map((k) => s.read(`k${k}`) === values[k + 5])).toEqual([false, true, true, true]);
    expect(s.read('k1')).toEqual({ n: 6 });
    expect(s.size).toBe(4);
  });

  it('drops a failed record: writes of a fork reach the batch only when merged', async () => {
    const s = new PartitionStore<string>(undefined);
    const tx = s.begin();
    const failed = tx.fork();
    await failed.put('x', 'half-done');
    expect(await tx.get('x')).toBeUndefined();
    const retried = tx.fork();
    await retried.put('x', 'done');
    expect(await retried.get('x')).toBe('done');
    tx.merge(retried);
    expect(await tx.get('x')).toBe('done');
  });

  it('names the keys not written for the retention, oldest first, with a limit', () => {
    const s = new PartitionStore<number>(HOUR);
    const tx = s.begin();
    void tx.put('first', 1);
    s.apply(tx, 1_000);
    const tx2 = s.begin();
    void tx2.put('second', 2);
    s.apply(tx2, 2_000);
    expect(s.expired(1_000 + HOUR - 1, 10)).toEqual([]);
    expect(s.expired(2_000 + HOUR, 10)).toEqual(['first', 'second']);
    expect(s.expired(2_000 + HOUR, 1)).toEqual(['first']);
    // A rewrite moves the key to the end and renews it.
    const tx3 = s.begin();
    void tx3.put('first', 3);
    s.apply(tx3, 3_000);
    expect(s.expired(2_000 + HOUR, 10)).toEqual(['second']);
  });

  it.each([
    ['hot', 10],
    ['packed', 0],
  ])('expires a short-lived key written after a long-lived one that has not expired (%s entries)', (_name, hot) => {
    const s = new PartitionStore<number>({ ms: 10 * HOUR, byPrefix: { 's:': HOUR } }, hot);
    for (const [key, at] of [
      ['long', 0],
      ['s:short', 1_000],
      ['s:newer', 2 * HOUR],
    ] as const) {
      const tx = s.begin();
      void tx.put(key, 1);
      s.apply(tx, at);
    }
    expect(s.expired(1_000 + HOUR, 10)).toEqual(['s:short']);
    expect(s.expired(10 * HOUR, 10)).toEqual(['s:short', 's:newer', 'long']);
    expect(s.read('long')).toBe(1);
  });

  it.each([
    ['prefixes sharing a first character', { s: HOUR, 'se:': 2 * HOUR, 't:': 3 * HOUR }, [HOUR, HOUR, 3 * HOUR, 10 * HOUR, 10 * HOUR]],
    ['an empty prefix (every key) after others', { 'se:': 2 * HOUR, '': 4 * HOUR }, [4 * HOUR, 2 * HOUR, 4 * HOUR, 4 * HOUR, 4 * HOUR]],
  ])('gives each key the retention of the first prefix it starts with (%s)', (_name, byPrefix, expected) => {
    const s = new PartitionStore<number>({ ms: 10 * HOUR, byPrefix }, 0);
    const keys = ['s:a', 'se:b', 't:c', 'u:d', ''];
    for (const key of keys) {
      const tx = s.begin();
      void tx.put(key, 1);
      s.apply(tx, 0);
    }
    // A key expires at its class's retention: the first instant at which expired() names it.
    const expiresAt = keys.map((key) => [HOUR, 2 * HOUR, 3 * HOUR, 4 * HOUR, 10 * HOUR].find((t) => s.expired(t, 10).includes(key)));
    expect(expiresAt).toEqual(expected);
  });

  it('does not load entries already expired when restored, but still owes them a tombstone', () => {
    const now = 10 * HOUR;
    const s = new PartitionStore<number>(HOUR);
    s.restore('stale', 1, now - 2 * HOUR, now);
    s.restore('fresh', 2, now - 1_000, now);
    s.restore('stale-then-tombstoned', 3, now - 2 * HOUR, now);
    s.restore('stale-then-tombstoned', null, now - 2 * HOUR, now);
    expect(s.read('stale')).toBeUndefined();
    expect(s.size).toBe(1);
    expect(s.expired(now, 10)).toEqual(['stale']);
    const tx = s.begin();
    tx.delete('stale');
    s.apply(tx, now);
    expect(s.expired(now, 10)).toEqual([]);
  });

  it.each([
    ['no retention', undefined],
    ['a retention', HOUR],
  ])('bad input: a tombstone for an unknown key is harmless (%s)', (_name, retention) => {
    const s = new PartitionStore<number>(retention);
    s.restore('never-seen', null, 0, 0);
    expect(s.size).toBe(0);
    expect(s.expired(Date.now(), 10)).toEqual([]);
  });
});

describe('PendingOverlay', () => {
  it('shows the next batch the writes of the batch still committing, then the store alone once it is applied', async () => {
    const s = new PartitionStore<string>(undefined);
    s.restore('kept', 'committed', 0, 0);
    s.restore('removed', 'committed', 0, 0);
    const pending = s.begin();
    await pending.put('kept', 'pending');
    pending.delete('removed');
    const overlay = new PendingOverlay(s, pending);
    const next = overlay.begin();
    expect(await next.get('kept')).toBe('pending');
    expect(await next.get('removed')).toBeUndefined();
    expect(overlay.wrote('removed')).toBe(true);
    expect(overlay.wrote('other')).toBe(false);
    await next.put('new', 'next');
    // The batch before commits: its writes go into the store, and the overlay lets it go.
    s.apply(pending, 1);
    overlay.settle();
    expect(overlay.wrote('kept')).toBe(false);
    expect(await next.get('kept')).toBe('pending');
    expect(await next.get('removed')).toBeUndefined();
    expect([...next.changes()]).toEqual([['new', 'next']]);
    // A batch begun over a settled overlay reads the store: no chain of earlier batches is kept.
    s.apply(next, 2);
    expect(await overlay.begin().get('new')).toBe('next');
  });
});
