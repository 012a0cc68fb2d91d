/** The audit log: one row per change an admin, the console or the service itself made to a workspace. */
import type { Sql } from '../shared/db/db.js';

export async function audit(
  tx: Sql,
  workspaceId: string,
  action: string,
  detail: Record<string, unknown>,
  actor: string = 'forwarder',
): Promise<void> {
  await tx.query('INSERT INTO audit_log (workspace_id, actor, action, detail) VALUES ($1, $2, $3, $4::jsonb)', [
    workspaceId,
    actor,
    action,
    JSON.stringify(detail),
  ]);
}
