/**
 * read_committed: the records of aborted transactions are never delivered. Several dedupe members' transactional
 * producers write into one partition of events.deduped, so an answer often begins inside several aborted transactions
 * at once; an answer also often ends inside one (a 500-envelope chunk is larger than a 1 MiB fetch), its marker coming
 * in a later answer, which lists the transaction again. Batches of one record each here, offsets as in the log.
 */
import { describe, expect, it } from 'vitest';
import { committedBatches, type AbortedTransaction, type FetchedBatch } from './read-committed.js';

type Rec = { key: Buffer | null };
const PRODUCERS: Record<string, bigint> = { A: 1n, B: 2n, C: 3n, P: 4n };
const ABORT = Buffer.from([0, 0, 0, 0]);
const COMMIT = Buffer.from([0, 0, 0, 1]);
const batch = (offset: number, producer: string, attributes: number, key: Buffer | null): FetchedBatch<Rec> => ({
  firstOffset: BigInt(offset),
  lastOffsetDelta: 0,
  attributes,
  producerId: PRODUCERS[producer]!,
  records: [{ key }],
});
const record = (offset: number, producer: string) => batch(offset, producer, 0x10, Buffer.from(`k${offset}`));
const plain = (offset: number) => batch(offset, 'P', 0, Buffer.from(`k${offset}`));
const abortMarker = (offset: number, producer: string) => batch(offset, producer, 0x30, ABORT);
const commitMarker = (offset: number, producer: string) => batch(offset, producer, 0x30, COMMIT);
const aborted = (producer: string, firstOffset: number): AbortedTransaction => ({ producerId: PRODUCERS[producer]!, firstOffset: BigInt(firstOffset) });
const offsets = (bs: FetchedBatch<Rec>[]) => bs.map((b) => Number(b.firstOffset));

describe('read_committed: records of aborted transactions are dropped', () => {
  it.each([
    {
      name: 'an answer that begins inside two aborted transactions of two producers',
      batches: [record(12, 'B'), record(13, 'A'), record(14, 'C'), abortMarker(15, 'A'), abortMarker(16, 'B'), record(17, 'C')],
      aborted: [aborted('A', 10), aborted('B', 11)],
      kept: [14, 17],
    },
    {
      name: 'aborted transactions listed out of order',
      batches: [record(20, 'A'), record(21, 'B'), record(22, 'A'), abortMarker(23, 'B'), abortMarker(24, 'A'), record(25, 'B')],
      aborted: [aborted('B', 21), aborted('A', 20)],
      kept: [25],
    },
    {
      name: 'a committed producer between two aborted ones',
      batches: [record(30, 'A'), record(31, 'C'), record(32, 'B'), abortMarker(33, 'A'), record(34, 'C'), abortMarker(35, 'B')],
      aborted: [aborted('A', 30), aborted('B', 32)],
      kept: [31, 34],
    },
    {
      name: 'an aborted transaction whose marker is not in this answer (it comes in a later one)',
      batches: [record(40, 'A'), record(41, 'C'), record(42, 'A'), record(43, 'A')],
      aborted: [aborted('A', 40)],
      kept: [41],
    },
    {
      name: 'two aborted transactions of one producer, a committed one between them',
      batches: [record(50, 'A'), abortMarker(51, 'A'), record(52, 'A'), commitMarker(53, 'A'), record(54, 'A'), abortMarker(55, 'A'), plain(56)],
      aborted: [aborted('A', 50), aborted('A', 54)],
      kept: [52, 56],
    },
    {
      name: 'only aborted records and markers: nothing',
      batches: [record(60, 'A'), record(61, 'A'), abortMarker(62, 'A')],
      aborted: [aborted('A', 60)],
      kept: [],
    },
    { name: 'no aborted transaction: every record, no marker', batches: [record(1, 'A'), commitMarker(2, 'A'), plain(3)], aborted: [], kept: [1, 3] },
  ])('$name', ({ batches, aborted, kept }) => {
    expect(offsets(committedBatches(batches, aborted))).toEqual(kept);
  });
});
