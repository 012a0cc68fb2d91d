/**
 * The embedded runtime's RangeReader (stream/range.ts): a topic is rows of log_records with one partition, "0".
 * The workspace filter runs in SQL, so a replay of one workspace does not ship the others' rows.
 */
import type { Db } from '../../shared/db/db.js';
import { toNumber } from '../../shared/db/db.js';
import type { TopicName } from '../../shared/topics.js';
import type { Positions, RangeChunk, RangeReader, RangeReadOptions } from '../range.js';

export class EmbeddedRangeReader implements RangeReader {
  readonly runtime = 'embedded' as const;

  constructor(private readonly db: Db) {}

  /**
   * From the first record appended at or after `fromMs` (a record is appended after it was received) to the end of
   * the log now: a stage that lagged appended some of the range's records long after `toMs`, so there is no earlier
   * safe end; the workspace and time filter keeps the read cheap.
   */
  async bounds(topic: TopicName, fromMs: number): Promise<{ start: Positions; end: Positions }> {
    const r = await this.db.query<{ first: unknown; last: unknown }>(
      `SELECT (SELECT min("offset") FROM log_records WHERE topic = $1 AND appended_at >= to_timestamp($2::double precision / 1000.0)) AS first,
              (SELECT max("offset") FROM log_records WHERE topic = $1) AS last`,
      [topic, fromMs],
    );
    const end = r.rows[0]?.last === null || r.rows[0]?.last === undefined ? 0 : toNumber(r.rows[0].last) + 1;
    const start = r.rows[0]?.first === null || r.rows[0]?.first === undefined ? end : toNumber(r.rows[0].first);
    return { start: { 0: String(start) }, end: { 0: String(end) } };
  }

  async read(topic: TopicName, cursor: Positions, end: Positions, onChunk: (chunk: RangeChunk) => Promise<void>, opts: RangeReadOptions): Promise<void> {
    let next = Number(cursor['0'] ?? '0');
    const stop = Number(end['0'] ?? '0');
    while (next < stop && !opts.signal.aborted) {
      const r = await this.db.query<{ offset: unknown; key: string; value: unknown; at: unknown }>(
        `SELECT "offset", key, value, extract(epoch FROM appended_at) * 1000 AS at FROM log_records
         WHERE topic = $1 AND "offset" >= $2 AND "offset" < $3 AND ($4::text IS NULL OR value->>'workspace_id' = $4)
         ORDER BY "offset" LIMIT $5`,
        [topic, next, stop, opts.workspaceId ?? null, opts.chunkSize],
      );
      const records = r.rows.map((row) => ({
        topic,
        partition: 0,
        offset: String(toNumber(row.offset)),
        key: row.key,
        value: row.value,
        timestamp: toNumber(row.at),
      }));
      // A short page means nothing else of the workspace lies before the end.
      next = records.length < opts.chunkSize ? stop : Number(records.at(-1)!.offset) + 1;
      await onChunk({ partition: 0, records, next: String(next) });
    }
  }
}
