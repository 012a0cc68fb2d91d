/**
 * kafkajs drops the records of aborted transactions itself (read_committed), from the list of aborted transactions a
 * fetch answers with. Since events.deduped is keyed by identity graph, several dedupe members' transactional
 * producers write into one partition, so a fetch often begins inside several aborted transactions at once; kafkajs
 * 2.2.4 entered only one of them per record and passed the others' records on. patches/kafkajs+2.2.4.patch fixes
 * that; this holds the patched filter to it (the patch is applied by npm's postinstall and in the image).
 */
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';

const require = createRequire(import.meta.url);
const filterAbortedMessages = require('kafkajs/src/consumer/filterAbortedMessages') as (args: {
  messages: Message[];
  abortedTransactions: Array<{ producerId: string; firstOffset: string }>;
}) => Message[];

interface Message {
  offset: string;
  key: Buffer | null;
  batchContext: { producerId: string; inTransaction: boolean };
}

const ABORT = Buffer.from([0, 0, 0, 0]);
const record = (offset: number, producerId: string, key = `k${offset}`): Message => ({ offset: String(offset), key: Buffer.from(key), batchContext: { producerId, inTransaction: true } });
const abortMarker = (offset: number, producerId: string): Message => ({ offset: String(offset), key: ABORT, batchContext: { producerId, inTransaction: true } });
const offsets = (ms: Message[]) => ms.map((m) => Number(m.offset));

describe('read_committed: records of aborted transactions are dropped', () => {
  it.each([
    {
      name: 'a fetch that begins inside two aborted transactions of two producers',
      messages: [record(12, 'B'), record(13, 'A'), record(14, 'C'), abortMarker(15, 'A'), abortMarker(16, 'B'), record(17, 'C')],
      aborted: [{ producerId: 'A', firstOffset: '10' }, { producerId: 'B', firstOffset: '11' }],
      kept: [14, 17],
    },
    {
      name: 'aborted transactions listed out of order',
      messages: [record(20, 'A'), record(21, 'B'), record(22, 'A'), abortMarker(23, 'B'), abortMarker(24, 'A'), record(25, 'B')],
      aborted: [{ producerId: 'B', firstOffset: '21' }, { producerId: 'A', firstOffset: '20' }],
      kept: [25],
    },
    {
      name: 'a committed producer between two aborted ones',
      messages: [record(30, 'A'), record(31, 'C'), record(32, 'B'), abortMarker(33, 'A'), record(34, 'C'), abortMarker(35, 'B')],
      aborted: [{ producerId: 'A', firstOffset: '30' }, { producerId: 'B', firstOffset: '32' }],
      kept: [31, 34],
    },
    { name: 'no aborted transaction', messages: [record(1, 'A'), record(2, 'B')], aborted: [], kept: [1, 2] },
  ])('$name', ({ messages, aborted, kept }) => {
    const out = filterAbortedMessages({ messages, abortedTransactions: aborted }).filter((m) => !m.key?.equals(ABORT));
    expect(offsets(out)).toEqual(kept);
  });
});
