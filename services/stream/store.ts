/**
 * In-memory state stores, runtime-neutral: a store for ONE input partition (PartitionStore; the Kafka runtime keeps
 * one per partition it owns) and the batch transaction over any store (StoreTransaction; both runtimes).
 *
 * A partition's map is restored from its compacted changelog and changed only by a StoreTransaction applied after
 * the Kafka transaction carrying its changelog records committed, so the map is always the committed state.
 * With a retention, entries unwritten that long are evicted and tombstoned; entries are kept in write order, so
 * finding the expired ones looks only at the oldest.
 *
 * A partition's committed entries are kept packed, but for the latest writes: each one string (its write time and
 * its value, as JSON or, on Kafka, in the changelog's Avro schema: AvroPacking), not a tree of objects. The garbage
 * collector marks a string without looking inside it, so a store of a million entries costs the collector a million
 * strings instead of several million objects, numbers and arrays. The HOT_ENTRIES latest writes stay as the values
 * the batches wrote, so what is read and written again soon (a returning person's entries) is not unpacked and packed
 * each time. A read answers the store's own value while it is hot: callers never change what they read (the graph
 * copies first). docs/decisions.md has the measurements.
 */

/**
 * A keyed state store owned by the runtime (e.g. dedupe's first-seen markers). Writes are visible to later reads of
 * the same batch at once and are committed atomically with the outputs and the input position. On Kafka the store is
 * in memory, restored from its compacted changelog; embedded, it is a table, read with `getMany` for the keys the
 * runner does not hold from its earlier batches.
 */
export interface KeyValueStore<V> {
  get(key: string): Promise<V | undefined>;
  /** Values of many keys in one read (absent keys are absent from the map). */
  getMany(keys: readonly string[]): Promise<Map<string, V>>;
  put(key: string, value: V): Promise<void>;
  /** Removes a key (a tombstone on the changelog). */
  delete(key: string): void;
}

/**
 * How a store packs its cold entries into one flat string each, its write time included. The default packs JSON; the
 * Kafka runner packs in the changelog's Avro schema (stream/kafka/serde.ts AvroPacking): a third fewer bytes, and
 * faster to read. Values are plain data (they are changelog records too).
 */
export interface Packing<S> {
  pack(writtenAt: number, value: S): string;
  /** Packs a value from its changelog record's bytes, when the packing is in the changelog's own encoding. */
  packEncoded?(writtenAt: number, changelogValue: Buffer): string;
  unpack(packed: string): S;
  writtenAt(packed: string): number;
}

/**
 * `[writtenAt, value]` as JSON, the epoch ms of the write (the changelog record's timestamp when restored) first.
 * JSON.stringify answers one flat string; a concatenation would leave a rope of three objects.
 */
export const JSON_PACKING: Packing<unknown> = {
  pack: (writtenAt, value) => JSON.stringify([writtenAt, value]),
  unpack: (p) => (JSON.parse(p) as [number, unknown])[1],
  writtenAt: (p) => Number(p.slice(1, p.indexOf(','))),
};

type Packed = string;

/** A recently written entry, kept as the value the batch wrote until HOT_ENTRIES newer writes push it out. */
interface Hot<S> {
  readonly value: S;
  readonly writtenAt: number;
  /**
   * Its changelog record's value, packed from when it turns cold (Packing.packEncoded) instead of encoding again. A
   * small Buffer shares Node's 8 KiB pool with others allocated near it: the hot entries hold some of the pool's
   * latest slabs (a few MB), not more.
   */
  readonly encoded: Buffer | undefined;
}
type Stored<S> = Packed | Hot<S>;

/**
 * How many of the latest writes a partition store keeps unpacked: a returning person's entries are read and written
 * again while they are hot, without a parse and a stringify each time, and the collector still marks few objects.
 */
export const HOT_ENTRIES = 10_000;

/**
 * What the Kafka runner needs of one partition's store. PartitionStore is the generic one; a processor may bring
 * a compact one of its own (dedupe's CompactDedupeStore) through `store.partitionStore` on the processor.
 */
export interface PartitionStateStore<S> {
  readonly size: number;
  restore(key: string, value: S | null, writtenAt: number, now: number): void;
  read(key: string): S | undefined;
  /** Keys to tombstone (a store that cannot name its evicted keys returns none and relies on delete retention). */
  expired(now: number, limit: number): string[];
  begin(): StoreTransaction<S>;
  /** `encoded`: the changelog records' values of the transaction's writes, by key, when the runtime has them. */
  apply(tx: StoreTransaction<S>, now: number, encoded?: ReadonlyMap<string, Buffer>): void;
}

/** How long entries stay unwritten before they expire: one default, and others for keys with given prefixes. */
export interface Retention {
  readonly ms: number | undefined;
  readonly byPrefix?: Readonly<Record<string, number>>;
}

interface RetentionClass {
  readonly prefix: string | null;
  readonly ms: number | undefined;
  /** In write order (a write moves its key to the end), so the expired ones are found at the front. */
  readonly entries: Map<string, Stored<unknown>>;
}

export class PartitionStore<S> implements PartitionStateStore<S> {
  private readonly classes: RetentionClass[];
  /**
   * The prefix classes by their prefix's first character (a key tries only those), or null when a prefix is empty
   * (every key tries every class in order).
   */
  private readonly byFirstChar: Map<string, RetentionClass[]> | null;
  private readonly defaultClass: RetentionClass;
  /** Keys whose last changelog record had expired when restored: not loaded, still owed a tombstone. */
  private readonly expiredAtRestore = new Set<string>();
  /** Keys whose entry is Hot, oldest write first (a write moves its key to the end). */
  private readonly hot = new Map<string, RetentionClass>();

  constructor(
    retention: number | undefined | Retention,
    private readonly hotEntries = HOT_ENTRIES,
    private readonly packing: Packing<S> = JSON_PACKING as Packing<S>,
  ) {
    const r: Retention = typeof retention === 'object' ? retention : { ms: retention };
    this.classes = [
      ...Object.entries(r.byPrefix ?? {}).map(([prefix, ms]) => ({ prefix, ms, entries: new Map<string, Stored<unknown>>() })),
      { prefix: null, ms: r.ms, entries: new Map<string, Stored<unknown>>() },
    ];
    this.defaultClass = this.classes.at(-1)!;
    const prefixed = this.classes.slice(0, -1);
    this.byFirstChar = prefixed.some((c) => c.prefix === '') ? null : new Map();
    for (const c of prefixed) {
      const first = c.prefix!.charAt(0);
      this.byFirstChar?.set(first, [...(this.byFirstChar.get(first) ?? []), c]);
    }
  }

  private classOf(key: string): RetentionClass {
    const candidates = this.byFirstChar === null ? this.classes : this.byFirstChar.get(key.charAt(0));
    if (candidates) for (const c of candidates) if (c.prefix === null || key.startsWith(c.prefix)) return c;
    return this.defaultClass;
  }

  get size(): number {
    let n = 0;
    for (const c of this.classes) n += c.entries.size;
    return n;
  }

  /** Applies one changelog record while restoring (null: a tombstone). Already expired entries are not loaded. */
  restore(key: string, value: S | null, writtenAt: number, now: number): void {
    const c = this.classOf(key);
    c.entries.delete(key);
    this.hot.delete(key);
    this.expiredAtRestore.delete(key);
    if (value === null) return;
    if (c.ms !== undefined && now - writtenAt >= c.ms) {
      this.expiredAtRestore.add(key);
      return;
    }
    c.entries.set(key, this.packing.pack(writtenAt, value));
  }

  /** The committed value: shared with the store while the entry is hot, so a caller that changes it copies it first. */
  read(key: string): S | undefined {
    const e = this.classOf(key).entries.get(key) as Stored<S> | undefined;
    return e === undefined ? undefined : typeof e === 'string' ? this.packing.unpack(e) : e.value;
  }

  /** Keys not written for their retention (those found expired when restoring first, then the oldest), at most `limit`. */
  expired(now: number, limit: number): string[] {
    const out: string[] = [];
    for (const key of this.expiredAtRestore) {
      if (out.length >= limit) return out;
      out.push(key);
    }
    for (const c of this.classes) {
      if (c.ms === undefined) continue;
      for (const [key, e] of c.entries) {
        if (now - (typeof e === 'string' ? this.packing.writtenAt(e) : e.writtenAt) < c.ms || out.length >= limit) break;
        out.push(key);
      }
    }
    return out;
  }

  begin(): StoreTransaction<S> {
    return new StoreTransaction<S>((key) => this.read(key));
  }

  /** Applies a committed transaction's writes (with their changelog values, when the runtime has them). */
  apply(tx: StoreTransaction<S>, now: number, encoded?: ReadonlyMap<string, Buffer>): void {
    for (const [key, value] of tx.changes()) {
      const c = this.classOf(key);
      c.entries.delete(key);
      this.hot.delete(key);
      if (this.expiredAtRestore.size > 0) this.expiredAtRestore.delete(key);
      if (value === null) continue;
      c.entries.set(key, { value, writtenAt: now, encoded: this.packing.packEncoded ? encoded?.get(key) : undefined });
      this.hot.set(key, c);
    }
    // The oldest hot entries beyond the bound are packed in place (their place in write order stays).
    for (const [key, c] of this.hot) {
      if (this.hot.size <= this.hotEntries) break;
      this.hot.delete(key);
      const e = c.entries.get(key) as Hot<S>;
      c.entries.set(key, e.encoded ? this.packing.packEncoded!(e.writtenAt, e.encoded) : this.packing.pack(e.writtenAt, e.value));
    }
  }
}

/**
 * The writes of one batch (or of one record inside it: fork/merge), visible to its own reads at once. A record whose
 * processing throws is retried on a fresh fork, so a half-processed record leaves no writes behind.
 */
export class StoreTransaction<S> implements KeyValueStore<S> {
  private readonly writes = new Map<string, S | null>();

  /**
   * `base` reads the committed value of a key synchronously; `load`, when given, makes sure the base holds the given
   * keys first (a store whose committed state is in a table reads them in one query).
   */
  constructor(
    private readonly base: (key: string) => S | undefined,
    private readonly load?: (keys: readonly string[]) => Promise<void>,
  ) {}

  async get(key: string): Promise<S | undefined> {
    if (this.load && !this.writes.has(key)) await this.load([key]);
    return this.lookup(key);
  }

  async getMany(keys: readonly string[]): Promise<Map<string, S>> {
    if (this.load) await this.load(keys.filter((k) => !this.writes.has(k)));
    const out = new Map<string, S>();
    for (const k of keys) {
      const v = this.lookup(k);
      if (v !== undefined) out.set(k, v);
    }
    return out;
  }

  async put(key: string, value: S): Promise<void> {
    this.writes.set(key, value);
  }

  /** Removes a key (a tombstone on the changelog). */
  delete(key: string): void {
    this.writes.set(key, null);
  }

  has(key: string): boolean {
    return this.writes.has(key);
  }

  /** This transaction's own write of a key: undefined when it wrote none, null when it deleted the key. */
  written(key: string): S | null | undefined {
    return this.writes.get(key);
  }

  private lookup(key: string): S | undefined {
    if (this.writes.has(key)) return this.writes.get(key) ?? undefined;
    return this.base(key);
  }

  fork(): StoreTransaction<S> {
    return new StoreTransaction<S>((key) => this.lookup(key), this.load);
  }

  /** Takes over a fork's writes. */
  merge(child: StoreTransaction<S>): void {
    for (const [key, value] of child.changes()) this.writes.set(key, value);
  }

  changes(): IterableIterator<[string, S | null]> {
    return this.writes.entries();
  }
}

/**
 * What a batch prepared while the batch before it commits reads as its committed state: that batch's writes first, then
 * the store. Once the earlier batch is applied to the store, settle() lets it go, so prepared batches never chain.
 */
export class PendingOverlay<S> {
  constructor(
    private readonly store: PartitionStateStore<S>,
    private pending: StoreTransaction<S> | undefined,
    /** How many expired keys the pending batch tombstones (the store lists them as expired until it is applied). */
    readonly pendingEvictions = 0,
  ) {}

  read(key: string): S | undefined {
    const w = this.pending?.written(key);
    return w === undefined ? this.store.read(key) : (w ?? undefined);
  }

  /** True when the pending batch wrote (or deleted) the key. */
  wrote(key: string): boolean {
    return this.pending?.has(key) ?? false;
  }

  /** The pending batch was applied to the store (or dropped with it): its writes are the store's now. */
  settle(): void {
    this.pending = undefined;
  }

  begin(): StoreTransaction<S> {
    return new StoreTransaction<S>((key) => this.read(key));
  }
}

const NO_STORE = 'this stage has no state store';

/** The store of a stage that declares none: any use is a bug, which the error policy dead-letters. */
export class NoStore<S> extends StoreTransaction<S> {
  constructor() {
    super(() => {
      throw new Error(NO_STORE);
    });
  }

  override async put(): Promise<void> {
    throw new Error(NO_STORE);
  }

  override delete(): void {
    throw new Error(NO_STORE);
  }

  override fork(): StoreTransaction<S> {
    return new NoStore<S>();
  }
}
