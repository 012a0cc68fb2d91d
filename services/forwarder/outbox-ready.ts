/**
 * Which batch groups of one sender key's outbox (a connection's, a destination's) are ready to send: a full batch
 * waits, or the group's first conversion has lingered long enough.
 *
 * The outboxes hold every conversion a platform outage or a lost token backs up, so the question is asked without
 * reading them whole: a skip scan walks the distinct groups on the (key, group columns…, id) index, then each group
 * reads its first row and counts its rows up to one batch. A check costs O(groups × batch size) index entries, the
 * same with ten rows waiting as with ten million (a GROUP BY over the key's rows cost 2–6 ms a tick with a few
 * thousand, and grew with the backlog that a recovering connection has to drain).
 *
 * "Lingered" is read off the group's first row by id; ids are handed out in insert order, so that is its oldest
 * row but for transactions that overlapped (one that began earlier may commit a later id): such a row is judged by
 * a neighbour enqueued a few milliseconds later at most.
 */
export interface OutboxShape {
  readonly table: string;
  /** The column naming the sender key (workspace_id, destination_id). */
  readonly key: string;
  /** The columns that split the key's rows into batches, in the index's order after the key. */
  readonly groups: readonly string[];
}

/**
 * A query of the ready groups of the key `keyValue` (an SQL expression: a parameter, or an outer column when used
 * in EXISTS) with their group columns and `first_id`; `lingerInterval` and `batchSize` are SQL expressions too.
 */
export function readyGroupsSql(shape: OutboxShape, keyValue: string, lingerInterval: string, batchSize: string): string {
  const { table, key, groups } = shape;
  const cols = groups.map((c) => `o.${c}`).join(', ');
  const ordered = `${cols}, o.id`;
  const sameGroup = groups.map((c) => `o.${c} = g.${c}`).join(' AND ');
  return `WITH RECURSIVE g AS (
      (SELECT ${cols} FROM ${table} o WHERE o.${key} = ${keyValue} ORDER BY ${cols} LIMIT 1)
      UNION ALL
      SELECT n.* FROM g, LATERAL (
        SELECT ${cols} FROM ${table} o
        WHERE o.${key} = ${keyValue} AND (${cols}) > (${groups.map((c) => `g.${c}`).join(', ')})
        ORDER BY ${cols} LIMIT 1) n
    )
    SELECT g.*, f.id AS first_id FROM g
    CROSS JOIN LATERAL (SELECT o.id, o.enqueued_at FROM ${table} o WHERE o.${key} = ${keyValue} AND ${sameGroup} ORDER BY ${ordered} LIMIT 1) f
    WHERE f.enqueued_at <= now() - ${lingerInterval}
       OR (SELECT count(*) FROM (SELECT 1 FROM ${table} o WHERE o.${key} = ${keyValue} AND ${sameGroup} ORDER BY ${ordered} LIMIT ${batchSize}) w) >= ${batchSize}`;
}
