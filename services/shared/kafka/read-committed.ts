/**
 * read_committed on the client side: which record batches of one partition's fetch answer a consumer may deliver.
 *
 * With isolation level read_committed the broker answers up to the last stable offset and lists the aborted
 * transactions that overlap the answer (producer id and first offset of each); skipping their records is the
 * client's work. Kafka's own consumer does it as this does: walking the batches in offset order, a producer enters the
 * aborted set when the walk reaches its listed first offset and leaves it at its abort marker; its transactional
 * batches in between are skipped, whichever fetch the marker comes in (a transaction still open past the answer's end
 * is listed again in the next answer, from its first offset), and control batches are never delivered.
 */

/** A record batch as @platformatic/kafka parses it (only the fields read here). */
export interface FetchedBatch<R> {
  readonly firstOffset: bigint;
  readonly lastOffsetDelta: number;
  readonly attributes: number;
  readonly producerId: bigint;
  readonly records: readonly R[];
}

export interface AbortedTransaction {
  readonly producerId: bigint;
  readonly firstOffset: bigint;
}

/** Batch attributes (Kafka's record batch format v2). */
const TRANSACTIONAL = 0x10;
const CONTROL = 0x20;

/** A control batch's one record has the key (version int16, type int16): type 0 ends an aborted transaction. */
function isAbortMarker(key: Buffer | null | undefined): boolean {
  return key !== null && key !== undefined && key.length >= 4 && key.readInt16BE(2) === 0;
}

/** The batches of `batches` (one partition's, in offset order) holding committed or non-transactional records. */
export function committedBatches<B extends FetchedBatch<{ readonly key?: Buffer | null }>>(
  batches: readonly B[],
  aborted: readonly AbortedTransaction[],
): B[] {
  if (aborted.length === 0) return batches.filter((b) => (b.attributes & CONTROL) === 0);
  const pending = [...aborted].sort((a, b) => (a.firstOffset < b.firstOffset ? -1 : a.firstOffset > b.firstOffset ? 1 : 0));
  const abortedProducers = new Set<bigint>();
  let next = 0;
  const out: B[] = [];
  for (const batch of batches) {
    const last = batch.firstOffset + BigInt(batch.lastOffsetDelta);
    while (next < pending.length && pending[next]!.firstOffset <= last) abortedProducers.add(pending[next++]!.producerId);
    if ((batch.attributes & CONTROL) !== 0) {
      if (isAbortMarker(batch.records[0]?.key)) abortedProducers.delete(batch.producerId);
      continue;
    }
    if ((batch.attributes & TRANSACTIONAL) !== 0 && abortedProducers.has(batch.producerId)) continue;
    out.push(batch);
  }
  return out;
}
