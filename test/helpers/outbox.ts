/**
 * The marker that the forwarder is done with a workspace: its outbox is empty. A conversion leaves the outbox in the
 * transaction that records the platform's answer, so once it is empty every send has been answered, and a test can
 * then check that nothing more arrived (instead of sleeping and hoping the machine was fast enough).
 */
import type { Db } from '../../services/shared/db/db.js';
import { eventually } from './forwarder-rig.js';

export async function outboxEmptied(db: Db, workspaceId: string, timeoutMs = 15_000): Promise<void> {
  await eventually(
    `the outbox of ${workspaceId} emptied`,
    async () => (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM forward_outbox WHERE workspace_id = $1', [workspaceId])).rows[0]!.n === 0,
    timeoutMs,
  );
}
