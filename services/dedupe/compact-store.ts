/**
 * A compact in-memory store for dedupe's first-seen markers (DedupeState) on the Kafka runtime, at a fraction of the
 * generic PartitionStore's memory per key. One open-addressing table per key mode over typed arrays, one slot per
 * key: a 96-bit fingerprint of the key instead of the string, first_seen as epoch ms, and request_id as 16 bytes when
 * it is a canonical lower-case UUID (else in a side map), so get() returns exactly the DedupeState that was put.
 *
 * Two keys with the same fingerprint would share a marker (the second key's first event dropped); 96 bits make that
 * negligible at any size a process can hold (docs/decisions.md).
 * evictExpired() cannot name the keys it evicts, so the changelog is bounded by the topic's retention, not tombstones.
 */
import type { KeyMode } from '../domain/envelope.js';
import { StoreTransaction } from '../stream/store.js';
import type { KeyValueStore } from '../stream/contract.js';
import type { DedupeState, SeenMarker } from './seen-marker.js';

/** A key's 96-bit fingerprint: three independent 32-bit hashes (murmur3-style mixing of UTF-16 code units). */
export type Fingerprint = readonly [number, number, number];

export function fingerprint(key: string): Fingerprint {
  const n = key.length;
  let h1 = 0x9747b28c ^ n;
  let h2 = 0x5bd1e995 ^ Math.imul(n, 0x27d4eb2f);
  let h3 = 0x3c6ef372 ^ Math.imul(n, 0x165667b1);
  // Two UTF-16 code units per 32-bit block.
  for (let i = 0; i < n; i += 2) {
    const c = key.charCodeAt(i) | ((i + 1 < n ? key.charCodeAt(i + 1) : 0) << 16);
    let k1 = Math.imul(c, 0xcc9e2d51);
    k1 = (k1 << 15) | (k1 >>> 17);
    h1 ^= Math.imul(k1, 0x1b873593);
    h1 = (h1 << 13) | (h1 >>> 19);
    h1 = (Math.imul(h1, 5) + 0xe6546b64) | 0;
    let k2 = Math.imul(c ^ 0x5a5a5a5a, 0x85ebca6b);
    k2 = (k2 << 17) | (k2 >>> 15);
    h2 ^= Math.imul(k2, 0xc2b2ae35);
    h2 = (h2 << 11) | (h2 >>> 21);
    h2 = (Math.imul(h2, 9) + 0x7fb6e5a1) | 0;
    let k3 = Math.imul(c ^ 0xa5a5a5a5, 0x27d4eb2f);
    k3 = (k3 << 13) | (k3 >>> 19);
    h3 ^= Math.imul(k3, 0x165667b1);
    h3 = (h3 << 15) | (h3 >>> 17);
    h3 = (Math.imul(h3, 7) + 0x61c88647) | 0;
  }
  return [fmix(h1 ^ Math.imul(n, 0x9e3779b1)), fmix(h2 ^ 0x2545f491), fmix(h3 ^ 0x6a09e667)];
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const BYTE_HEX = Array.from({ length: 256 }, (_, v) => v.toString(16).padStart(2, '0'));

/** Writes a canonical lower-case UUID's 16 bytes at `at`; false (nothing written) for any other string. */
function packUuid(s: string, out: Uint8Array, at: number): boolean {
  if (s.length !== 36 || !UUID.test(s)) return false;
  let j = at;
  for (let i = 0; i < 36; i += 2) {
    if (i === 8 || i === 13 || i === 18 || i === 23) i++;
    out[j++] = (hexValue(s.charCodeAt(i)) << 4) | hexValue(s.charCodeAt(i + 1));
  }
  return true;
}

const hexValue = (c: number): number => (c <= 57 ? c - 48 : c - 87);

function unpackUuid(b: Uint8Array, at: number): string {
  let s = '';
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) s += '-';
    s += BYTE_HEX[b[at + i]!]!;
  }
  return s;
}

const EMPTY = 0;
const UUID_ID = 1;
/** The request id is not a canonical UUID: it is in the side map under the fingerprint. */
const OTHER_ID = 2;

/** One key mode's markers: fingerprint → (first_seen, request_id). */
export class MarkerTable {
  private capacity = 0;
  private mask = 0;
  private count = 0;
  private fpA!: Uint32Array;
  private fpB!: Uint32Array;
  private fpC!: Uint32Array;
  private firstSeen!: Float64Array;
  private requestIds!: Uint8Array;
  private kind!: Uint8Array;
  /** Request ids that are not canonical UUIDs (tests, other producers), by fingerprint `a:b`. */
  private readonly otherIds = new Map<string, string>();

  constructor(initialCapacity = 1024) {
    let c = 16;
    while (c < initialCapacity) c *= 2;
    this.allocate(c);
  }

  get size(): number {
    return this.count;
  }

  /** Bytes held by the typed arrays (the side map's few strings not counted). */
  get bytes(): number {
    return this.capacity * (4 + 4 + 4 + 8 + 16 + 1);
  }

  private find([a, b, c]: Fingerprint): number {
    let i = a & this.mask;
    for (;;) {
      if (this.kind[i] === EMPTY) return -1 - i;
      if (this.fpA[i] === a && this.fpB[i] === b && this.fpC[i] === c) return i;
      i = (i + 1) & this.mask;
    }
  }

  get(fp: Fingerprint): SeenMarker | undefined {
    const i = this.find(fp);
    if (i < 0) return undefined;
    const requestId = this.kind[i] === UUID_ID ? unpackUuid(this.requestIds, i * 16) : this.otherIds.get(fp.join(':'))!;
    return { first_seen: this.firstSeen[i]!, request_id: requestId };
  }

  set(fp: Fingerprint, marker: SeenMarker): void {
    let i = this.find(fp);
    if (i < 0) {
      if ((this.count + 1) * 4 > this.capacity * 3) {
        this.grow();
        i = this.find(fp);
      }
      i = -1 - i;
      this.count++;
      this.fpA[i] = fp[0];
      this.fpB[i] = fp[1];
      this.fpC[i] = fp[2];
    } else if (this.kind[i] === OTHER_ID) {
      this.otherIds.delete(fp.join(':'));
    }
    this.firstSeen[i] = marker.first_seen;
    if (packUuid(marker.request_id, this.requestIds, i * 16)) {
      this.kind[i] = UUID_ID;
    } else {
      this.kind[i] = OTHER_ID;
      this.otherIds.set(fp.join(':'), marker.request_id);
    }
  }

  delete(fp: Fingerprint): boolean {
    const i = this.find(fp);
    if (i < 0) return false;
    this.removeAt(i);
    return true;
  }

  /** Removes the markers with first_seen <= olderThan; returns how many. */
  evict(olderThan: number): number {
    let n = 0;
    for (let i = 0; i < this.capacity; ) {
      // removeAt shifts a later slot into i: look at i again before moving on.
      if (this.kind[i] !== EMPTY && this.firstSeen[i]! <= olderThan) {
        this.removeAt(i);
        n++;
      } else {
        i++;
      }
    }
    return n;
  }

  private removeAt(slot: number): void {
    if (this.kind[slot] === OTHER_ID) this.otherIds.delete(`${this.fpA[slot]}:${this.fpB[slot]}:${this.fpC[slot]}`);
    // Backward-shift deletion: move later members of the probe run into the hole, so no tombstones are needed.
    let hole = slot;
    let j = slot;
    for (;;) {
      j = (j + 1) & this.mask;
      if (this.kind[j] === EMPTY) break;
      const home = this.fpA[j]! & this.mask;
      // j may move to the hole unless its home lies cyclically in (hole, j].
      const inRun = hole <= j ? home > hole && home <= j : home > hole || home <= j;
      if (inRun) continue;
      this.moveSlot(j, hole);
      hole = j;
    }
    this.kind[hole] = EMPTY;
    this.count--;
  }

  private moveSlot(from: number, to: number): void {
    this.fpA[to] = this.fpA[from]!;
    this.fpB[to] = this.fpB[from]!;
    this.fpC[to] = this.fpC[from]!;
    this.firstSeen[to] = this.firstSeen[from]!;
    this.kind[to] = this.kind[from]!;
    this.requestIds.copyWithin(to * 16, from * 16, from * 16 + 16);
  }

  /** Empty columns for `c` slots (a power of two). */
  private allocate(c: number): void {
    this.capacity = c;
    this.mask = c - 1;
    this.fpA = new Uint32Array(c);
    this.fpB = new Uint32Array(c);
    this.fpC = new Uint32Array(c);
    this.firstSeen = new Float64Array(c);
    this.requestIds = new Uint8Array(c * 16);
    this.kind = new Uint8Array(c);
  }

  private grow(): void {
    const old = { fpA: this.fpA, fpB: this.fpB, fpC: this.fpC, firstSeen: this.firstSeen, requestIds: this.requestIds, kind: this.kind, capacity: this.capacity };
    this.allocate(this.capacity * 2);
    for (let s = 0; s < old.capacity; s++) {
      if (old.kind[s] === EMPTY) continue;
      let i = old.fpA[s]! & this.mask;
      while (this.kind[i] !== EMPTY) i = (i + 1) & this.mask;
      this.fpA[i] = old.fpA[s]!;
      this.fpB[i] = old.fpB[s]!;
      this.fpC[i] = old.fpC[s]!;
      this.firstSeen[i] = old.firstSeen[s]!;
      this.kind[i] = old.kind[s]!;
      this.requestIds.set(old.requestIds.subarray(s * 16, s * 16 + 16), i * 16);
    }
  }
}

/**
 * The store: KeyValueStore<DedupeState> semantics (get gives back exactly what put stored, a key with no live
 * marker reads as undefined), plus what the Kafka runtime's PartitionStore does (restore from the changelog, read,
 * window-based eviction, size). One instance per input partition.
 */
export class CompactDedupeStore implements KeyValueStore<DedupeState> {
  private readonly live: MarkerTable;
  private readonly test: MarkerTable;
  private lastEviction = 0;
  private readonly evictEveryMs: number;

  /**
   * `windowMs`: how long a marker counts (the dedupe window, DEDUPE_WINDOW_HOURS; PartitionStore's retentionMs);
   * undefined: never evicted. `evictEveryMs`: how often apply() sweeps expired markers (default 60 s).
   */
  constructor(readonly windowMs: number | undefined, opts: { initialCapacity?: number; evictEveryMs?: number } = {}) {
    this.live = new MarkerTable(opts.initialCapacity ?? 1024);
    this.test = new MarkerTable(64);
    this.evictEveryMs = opts.evictEveryMs ?? 60_000;
  }

  /** Keys held (with a marker of either mode). A key with both modes counts twice. */
  get size(): number {
    return this.live.size + this.test.size;
  }

  /** Bytes of the typed arrays. */
  get bytes(): number {
    return this.live.bytes + this.test.bytes;
  }

  read(key: string): DedupeState | undefined {
    const fp = fingerprint(key);
    const live = this.live.get(fp);
    const test = this.test.get(fp);
    if (!live && !test) return undefined;
    const state: { v: 1; live?: SeenMarker; test?: SeenMarker } = { v: 1 };
    if (live) state.live = live;
    if (test) state.test = test;
    return state;
  }

  write(key: string, value: DedupeState | null): void {
    const fp = fingerprint(key);
    for (const mode of ['live', 'test'] as const satisfies readonly KeyMode[]) {
      const marker = value?.[mode];
      const table = mode === 'live' ? this.live : this.test;
      if (marker) table.set(fp, marker);
      else table.delete(fp);
    }
  }

  async get(key: string): Promise<DedupeState | undefined> {
    return this.read(key);
  }

  async getMany(keys: readonly string[]): Promise<Map<string, DedupeState>> {
    const out = new Map<string, DedupeState>();
    for (const k of keys) {
      const v = this.read(k);
      if (v !== undefined) out.set(k, v);
    }
    return out;
  }

  async put(key: string, value: DedupeState): Promise<void> {
    this.write(key, value);
  }

  delete(key: string): void {
    this.write(key, null);
  }

  /**
   * Applies one changelog record while restoring (null: a tombstone). Markers already outside the window at `now` are
   * not loaded (dedupeVerdict() would ignore them).
   */
  restore(key: string, value: DedupeState | null, _writtenAt: number, now: number): void {
    if (value === null || this.windowMs === undefined) {
      this.write(key, value);
      return;
    }
    const fresh = (m: SeenMarker | null | undefined) => (m && now - m.first_seen < this.windowMs! ? m : undefined);
    const live = fresh(value.live);
    const test = fresh(value.test);
    this.write(key, live || test ? { v: 1, ...(live ? { live } : {}), ...(test ? { test } : {}) } : null);
  }

  // ---- PartitionStore's interface (stream/store.ts), so the Kafka runner can hold one per partition ----

  /** A batch's writes, visible to its own reads at once, applied after its Kafka transaction committed. */
  begin(): StoreTransaction<DedupeState> {
    return new StoreTransaction<DedupeState>((key) => this.read(key));
  }

  /** Applies a committed transaction's writes; sweeps expired markers at most every `evictEveryMs`. */
  apply(tx: StoreTransaction<DedupeState>, now: number): void {
    for (const [key, value] of tx.changes()) this.write(key, value);
    if (now - this.lastEviction >= this.evictEveryMs) {
      this.lastEviction = now;
      this.evictExpired(now);
    }
  }

  /** None: this store does not keep keys, so it evicts in apply() instead (see the note at the top). */
  expired(_now: number, _limit: number): string[] {
    return [];
  }

  /** Drops markers older than the window at `now`; returns how many. O(capacity): run it every few minutes. */
  evictExpired(now: number): number {
    if (this.windowMs === undefined) return 0;
    const olderThan = now - this.windowMs;
    return this.live.evict(olderThan) + this.test.evict(olderThan);
  }
}
