/**
 * A small per-key cache with a short time to live, for read-mostly settings (forwarding setups, time zones) that
 * enrich would otherwise read once per event. A change is seen within the TTL; entries are plain values, so a
 * rolled-back transaction cannot leave anything wrong behind.
 */
export class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; until: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Values of many keys: cached ones from memory, the others from ONE call of `loadMany` (a key it does not return
   * takes `absent`).
   */
  async getMany(keys: readonly string[], loadMany: (missing: string[]) => Promise<Map<string, V>>, absent: V): Promise<Map<string, V>> {
    const out = new Map<string, V>();
    const missing: string[] = [];
    const now = this.now();
    for (const key of new Set(keys)) {
      const hit = this.entries.get(key);
      if (hit && hit.until > now) out.set(key, hit.value);
      else missing.push(key);
    }
    if (missing.length === 0) return out;
    const loaded = await loadMany(missing);
    for (const key of missing) {
      const value = loaded.has(key) ? loaded.get(key)! : absent;
      out.set(key, value);
      if (this.ttlMs > 0) {
        if (this.entries.size >= this.maxEntries) this.entries.clear();
        this.entries.set(key, { value, until: now + this.ttlMs });
      }
    }
    return out;
  }

  async get(key: string, load: () => Promise<V>): Promise<V> {
    const hit = this.entries.get(key);
    if (hit && hit.until > this.now()) return hit.value;
    const value = await load();
    if (this.ttlMs > 0) {
      if (this.entries.size >= this.maxEntries) this.entries.clear();
      this.entries.set(key, { value, until: this.now() + this.ttlMs });
    }
    return value;
  }
}
