import { LRUCache } from 'lru-cache';

/**
 * A small per-key cache with a short time to live, for read-mostly settings (forwarding setups, time zones) that
 * enrich would otherwise read once per event. A change is seen within the TTL; entries are plain values, so a
 * rolled-back transaction cannot leave anything wrong behind. A TTL of 0 caches nothing.
 */
export class TtlCache<V> {
  // Boxed because lru-cache does not store null or undefined, and "no setup" (null) is worth caching too.
  private readonly entries: LRUCache<string, { readonly value: V }> | null;

  // ttlResolution 0 reads the clock on every lookup, so an injected clock is honoured to the millisecond.
  constructor(ttlMs: number, maxEntries = 10_000, now: () => number = Date.now) {
    this.entries = ttlMs > 0 ? new LRUCache({ max: maxEntries, ttl: ttlMs, ttlResolution: 0, perf: { now } }) : null;
  }

  /**
   * Values of many keys: cached ones from memory, the others from ONE call of `loadMany` (a key it does not return
   * takes `absent`).
   */
  async getMany(keys: readonly string[], loadMany: (missing: string[]) => Promise<Map<string, V>>, absent: V): Promise<Map<string, V>> {
    const out = new Map<string, V>();
    const missing: string[] = [];
    for (const key of new Set(keys)) {
      const hit = this.entries?.get(key);
      if (hit) out.set(key, hit.value);
      else missing.push(key);
    }
    if (missing.length === 0) return out;
    const loaded = await loadMany(missing);
    for (const key of missing) {
      const value = loaded.has(key) ? loaded.get(key)! : absent;
      out.set(key, value);
      this.entries?.set(key, { value });
    }
    return out;
  }
}
