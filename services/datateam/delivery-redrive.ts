/**
 * Redriving deliveries: the dead and refused delivery records a person picks (by event id, or by the list's filter)
 * go again through their dead letters (redrive.ts), so a redrive of a delivery is a redrive of its letter under
 * today's setup, and the sent ledger of every destination still decides: nothing already sent goes twice. A dead
 * delivery (it waited too long after a failed attempt) has its letter like a refused one (reason `expired`). A
 * delivery without a waiting letter (its letter redriven or discarded already) is not counted. Audited as
 * `deliveries.redriven` with the actor.
 */
import type { Db } from '../shared/db/db.js';
import type { DeliveryRepo, DeliverySelection } from '../forwarder/delivery-repo.js';
import type { DeadLetterRepo } from './dead-letter-repo.js';
import type { Redriver } from './redrive.js';

/** At most this many deliveries a call: a larger selection is redriven by calling again (the redriven ones are `retrying`). */
export const DELIVERY_REDRIVE_LIMIT = 1000;

export interface DeliveryRedriveDeps {
  readonly db: Db;
  readonly deliveries: DeliveryRepo;
  readonly deadLetters: DeadLetterRepo;
  readonly redriver: Redriver;
}

export async function redriveDeliveries(
  deps: DeliveryRedriveDeps,
  workspaceId: string,
  selection: DeliverySelection,
  actor: string,
): Promise<{ redriven: number; failed: Array<{ id: string; error: string }> }> {
  const picked = (await deps.deliveries.redrivable(workspaceId, selection)).slice(0, DELIVERY_REDRIVE_LIMIT);
  const letters = await deps.deadLetters.byIds(workspaceId, picked.map((p) => p.letterId));
  const { redriven, failed } = await deps.redriver.redrive(workspaceId, letters);
  const stayed = new Set(failed.map((f) => f.id));
  await deps.deliveries.markRequeued(picked.filter((p) => !stayed.has(p.letterId)).map((p) => p.deliveryId));
  await deps.db.query('INSERT INTO audit_log (workspace_id, actor, action, detail) VALUES ($1, $2, $3, $4::jsonb)', [
    workspaceId,
    actor,
    'deliveries.redriven',
    JSON.stringify({
      redriven,
      ...('eventIds' in selection
        ? { event_ids: selection.eventIds.slice(0, 100) }
        : 'filter' in selection
          ? { filter: selection.filter }
          : { deliveries: selection.deliveryIds.length }),
      failed: failed.slice(0, 100).map((f) => f.id),
    }),
  ]);
  return { redriven, failed };
}
