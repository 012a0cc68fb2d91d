import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { sgtmEvent, webEvent } from '../../test/helpers/factories.js';
import { DAY, T0, fromA, fromB } from '../../test/helpers/envelopes.js';
import { envelopeKey } from '../domain/envelope.js';
import type { KeyValueStore, Outcome } from '../stream/contract.js';
import { CompactDedupeStore, MarkerTable, fingerprint } from './compact-store.js';
import { createDedupeProcessor } from './processor.js';
import type { DedupeState } from './seen-marker.js';

const WINDOW = 7 * DAY;

/** A tiny deterministic PRNG, so a failing sequence can be replayed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('CompactDedupeStore: what is put is what is read', () => {
  it.each([
    { name: 'live marker with a UUID request id', state: { v: 1, live: { first_seen: T0, request_id: randomUUID() } } },
    { name: 'test marker only', state: { v: 1, test: { first_seen: T0 + 1, request_id: randomUUID() } } },
    { name: 'both modes', state: { v: 1, live: { first_seen: T0, request_id: randomUUID() }, test: { first_seen: T0 - 5, request_id: randomUUID() } } },
    { name: 'a request id that is not a UUID', state: { v: 1, live: { first_seen: T0, request_id: 'r1' } } },
    { name: 'an upper-case UUID (kept as given)', state: { v: 1, live: { first_seen: T0, request_id: randomUUID().toUpperCase() } } },
    { name: 'millisecond first_seen', state: { v: 1, live: { first_seen: 1_763_731_234_567, request_id: randomUUID() } } },
  ] as Array<{ name: string; state: DedupeState }>)('$name', async ({ state }) => {
    const store = new CompactDedupeStore(WINDOW);
    await store.put('ws_a:k1', state);
    expect(await store.get('ws_a:k1')).toEqual(state);
    expect(await store.get('ws_a:k2')).toBeUndefined();
  });

  it('overwrites, and a mode missing from the new value is removed', async () => {
    const store = new CompactDedupeStore(WINDOW);
    await store.put('k', { v: 1, live: { first_seen: 1, request_id: 'a' }, test: { first_seen: 2, request_id: 'b' } });
    await store.put('k', { v: 1, live: { first_seen: 3, request_id: 'c' } });
    expect(await store.get('k')).toEqual({ v: 1, live: { first_seen: 3, request_id: 'c' } });
    store.delete('k');
    expect(await store.get('k')).toBeUndefined();
    expect(store.size).toBe(0);
  });
});

describe('MarkerTable against a Map (random inserts, overwrites, deletes, evictions, growth)', () => {
  it.each([1, 2, 3])('seed %i', (seed) => {
    const r = rng(seed);
    // A tiny table: growth and long probe runs (with wrap-around) on every step.
    const table = new MarkerTable(16);
    const ref = new Map<string, { first_seen: number; request_id: string }>();
    const keys = Array.from({ length: 3000 }, (_, i) => `ws_${seed}:k${i}`);
    for (let step = 0; step < 30_000; step++) {
      const key = keys[Math.floor(r() * keys.length)]!;
      const fp = fingerprint(key);
      const op = r();
      if (op < 0.55) {
        const m = { first_seen: Math.floor(r() * 1000), request_id: r() < 0.9 ? randomUUID() : `req-${step}` };
        table.set(fp, m);
        ref.set(key, m);
      } else if (op < 0.85) {
        expect(table.delete(fp)).toBe(ref.delete(key));
      } else if (op < 0.86) {
        const cut = Math.floor(r() * 300);
        let n = 0;
        for (const [k, m] of ref) if (m.first_seen <= cut) (ref.delete(k), n++);
        expect(table.evict(cut)).toBe(n);
      } else {
        expect(table.get(fp)).toEqual(ref.get(key));
      }
      expect(table.size).toBe(ref.size);
    }
    for (const key of keys) expect(table.get(fingerprint(key))).toEqual(ref.get(key));
  });
});

describe('CompactDedupeStore with the dedupe processor', () => {
  const dedupe = createDedupeProcessor({ windowMs: WINDOW });
  const run = async (store: KeyValueStore<DedupeState>, envelopes: unknown[]) => {
    const out: string[] = [];
    let offset = 0;
    for (const value of envelopes) {
      const [o] = (await dedupe.processBatch(
        [{ topic: dedupe.input, partition: 0, offset: String(offset++), key: envelopeKey(value as never), value, timestamp: T0 }],
        { sql: undefined as never, store, now: () => T0 },
      )) as [Outcome];
      out.push(o.type === 'ok' ? 'ok' : `${o.type}:${o.reason}`);
    }
    return out;
  };
  /** The reference: the generic in-memory store (a Map of the values as put). */
  const mapStore = (): KeyValueStore<DedupeState> => {
    const m = new Map<string, DedupeState>();
    return {
      get: async (k) => m.get(k),
      getMany: async (keys) => new Map(keys.flatMap((k) => (m.has(k) ? [[k, m.get(k)!] as const] : []))),
      put: async (k, v) => void m.set(k, v),
    };
  };

  it('gives the same verdicts as a Map store on mixed traffic (A and B, live and test, repeats, same request)', async () => {
    const r = rng(7);
    const envelopes: unknown[] = [];
    for (let i = 0; i < 400; i++) {
      const ws = `ws_${Math.floor(r() * 3)}`;
      const keyMode = r() < 0.8 ? 'live' : 'test';
      const receivedAt = T0 + Math.floor(r() * 2 * WINDOW);
      const key = `k${Math.floor(r() * 60)}`;
      if (r() < 0.6) envelopes.push(...fromA([webEvent({ event_metadata: { idempotency_key: key } })], { workspaceId: ws, keyMode, receivedAt }));
      else envelopes.push(...fromB([sgtmEvent(), sgtmEvent()], key, { workspaceId: ws, keyMode, receivedAt }));
    }
    envelopes.sort((x, y) => (x as { received_at: number }).received_at - (y as { received_at: number }).received_at);
    const expected = await run(mapStore(), envelopes);
    expect(new Set(expected)).toEqual(new Set(['ok', 'drop:duplicate', 'drop:duplicate_request']));
    expect(await run(new CompactDedupeStore(WINDOW, { initialCapacity: 16 }), envelopes)).toEqual(expected);
  });
});

describe('CompactDedupeStore: restore and window eviction', () => {
  it('restores changelog records (tombstones remove), skipping markers already outside the window', () => {
    const store = new CompactDedupeStore(WINDOW);
    const now = T0 + WINDOW + DAY;
    store.restore('old', { v: 1, live: { first_seen: T0, request_id: randomUUID() } }, T0, now);
    const fresh: DedupeState = { v: 1, live: { first_seen: now - DAY, request_id: randomUUID() }, test: { first_seen: T0, request_id: 't' } };
    store.restore('mixed', fresh, now - DAY, now);
    store.restore('gone', { v: 1, live: { first_seen: now, request_id: 'x' } }, now, now);
    store.restore('gone', null, now, now);
    expect(store.read('old')).toBeUndefined();
    expect(store.read('mixed')).toEqual({ v: 1, live: fresh.live });
    expect(store.read('gone')).toBeUndefined();
    expect(store.size).toBe(1);
  });

  it('evicts markers older than the window and keeps the others', () => {
    const store = new CompactDedupeStore(WINDOW, { initialCapacity: 16 });
    for (let i = 0; i < 1000; i++) store.write(`k${i}`, { v: 1, live: { first_seen: T0 + i * 1000, request_id: randomUUID() } });
    expect(store.evictExpired(T0 + WINDOW + 499_500)).toBe(500);
    expect(store.size).toBe(500);
    expect(store.read('k499')).toBeUndefined();
    expect(store.read('k500')?.live?.first_seen).toBe(T0 + 500_000);
  });
});

describe('CompactDedupeStore as the Kafka runner uses a PartitionStore', () => {
  it('a transaction sees its own writes at once and the store only after apply()', async () => {
    const store = new CompactDedupeStore(WINDOW, { evictEveryMs: 1 });
    store.write('old', { v: 1, live: { first_seen: T0, request_id: randomUUID() } });
    const tx = store.begin();
    const state: DedupeState = { v: 1, live: { first_seen: T0 + WINDOW, request_id: randomUUID() } };
    await tx.put('new', state);
    expect(await tx.get('new')).toEqual(state);
    expect(store.read('new')).toBeUndefined();
    expect(store.expired(T0 + 2 * WINDOW, 100)).toEqual([]);
    store.apply(tx, T0 + WINDOW + 1);
    expect(store.read('new')).toEqual(state);
    // apply() also swept the marker that left the window.
    expect(store.read('old')).toBeUndefined();
  });
});

describe('fingerprint', () => {
  it('has no collision among 200,000 realistic keys, and spreads over the low bits', () => {
    const seen = new Set<string>();
    const buckets = new Uint32Array(1024);
    const words = [new Set<number>(), new Set<number>(), new Set<number>()];
    for (let i = 0; i < 200_000; i++) {
      const fp = fingerprint(`ws_${(i % 50).toString().padStart(16, '0')}:idem-${randomUUID()}`);
      seen.add(fp.join(':'));
      // Each word on its own: 200,000 keys over 2^32 values rarely collide within one word either.
      fp.forEach((w, j) => words[j]!.add(w));
      buckets[fp[0] & 1023]!++;
    }
    expect(seen.size).toBe(200_000);
    // Birthday bound for one 32-bit word: ~200000²/2³³ ≈ 4.7 expected repeats; far more would mean correlated words.
    for (const w of words) expect(w.size).toBeGreaterThan(200_000 - 30);
    // ~195 per bucket; a poor hash would leave buckets empty or crowded.
    expect(Math.min(...buckets)).toBeGreaterThan(120);
    expect(Math.max(...buckets)).toBeLessThan(280);
  });
});
