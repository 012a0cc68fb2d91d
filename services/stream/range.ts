/**
 * Reading a topic again over a time range, on either runtime, from a position that can be saved and resumed: what a
 * replay (services/replay) needs. Positions are `{partition: next offset}` as strings (Kafka offsets are int64), so
 * they go into a jsonb column as they are. The live consumer groups are never touched.
 */
import type { InputRecord } from './contract.js';
import type { TopicName } from '../shared/topics.js';

/** Next offset to read, per partition. */
export type Positions = Readonly<Record<string, string>>;

export interface RangeChunk {
  readonly partition: number;
  /** The records read, in offset order: all of them, or only the workspace's when the reader can filter. */
  readonly records: ReadonlyArray<InputRecord<unknown>>;
  /** The partition's position after this chunk (save it with what the chunk produced). */
  readonly next: string;
}

export interface RangeReadOptions {
  readonly signal: AbortSignal;
  /** Records per chunk, at most. */
  readonly chunkSize: number;
  /** A hint: a reader that can filter at the source returns only this workspace's records. */
  readonly workspaceId?: string;
}

export interface RangeReader {
  readonly runtime: 'embedded' | 'kafka';
  /**
   * Where records received in [fromMs, toMs) lie: `start` and `end` per partition. Generous: the caller filters on the
   * records' own receive time.
   */
  bounds(topic: TopicName, fromMs: number, toMs: number): Promise<{ start: Positions; end: Positions }>;
  /**
   * Reads from `cursor` up to `end` (exclusive) in chunks, one `onChunk` at a time (its promise is the back pressure).
   * Resolves when every partition reached its end, or early when the signal aborts.
   */
  read(topic: TopicName, cursor: Positions, end: Positions, onChunk: (chunk: RangeChunk) => Promise<void>, opts: RangeReadOptions): Promise<void>;
}

/** How far `cursor` went from `start` towards `end`, 0..1 (records, summed over partitions). */
export function rangeProgress(start: Positions, end: Positions, cursor: Positions): number {
  let total = 0n;
  let done = 0n;
  for (const [p, e] of Object.entries(end)) {
    const s = BigInt(start[p] ?? e);
    const c = BigInt(cursor[p] ?? s);
    const span = BigInt(e) - s;
    if (span <= 0n) continue;
    total += span;
    done += (c > BigInt(e) ? BigInt(e) : c) - s;
  }
  return total === 0n ? 1 : Number((done * 10_000n) / total) / 10_000;
}

/** Whether every partition of `cursor` reached its `end`. */
export function rangeDone(end: Positions, cursor: Positions): boolean {
  return Object.entries(end).every(([p, e]) => BigInt(cursor[p] ?? '0') >= BigInt(e));
}
