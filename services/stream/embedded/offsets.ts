/** Committed positions of the embedded log's consumer groups (table consumer_offsets), read and written in SQL. */
import { toNumber, type Sql } from '../../shared/db/db.js';
import type { TopicName } from '../../shared/topics.js';

/** The group's committed offset on the topic (0: nothing consumed yet). */
export async function committedOffset(sql: Sql, group: string, topic: TopicName): Promise<number> {
  const r = await sql.query<{ offset: unknown }>('SELECT "offset" FROM consumer_offsets WHERE group_id = $1 AND topic = $2', [
    group,
    topic,
  ]);
  return r.rows[0] ? toNumber(r.rows[0].offset) : 0;
}

/** Commits the group's offset; call it in the transaction that wrote what consuming up to it produced. */
export async function commitOffset(tx: Sql, group: string, topic: TopicName, offset: number): Promise<void> {
  await tx.query(
    `INSERT INTO consumer_offsets (group_id, topic, "offset", updated_at) VALUES ($1, $2, $3, now())
     ON CONFLICT (group_id, topic) DO UPDATE SET "offset" = EXCLUDED."offset", updated_at = now()`,
    [group, topic, offset],
  );
}
