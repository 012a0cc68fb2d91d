/** Forwarding setups for the admin API: the shared store functions plus the audit trail. */
import { audit } from '../domain/audit-log.js';
import type { Db } from '../shared/db/db.js';
import {
  readForwardingSetup,
  writeForwardingSetup,
  type ForwardingSetup,
  type ForwardingSetupInput,
} from '../domain/forwarding-setup.js';

export class ForwardingRepo {
  constructor(private readonly db: Db) {}

  async workspaceExists(workspaceId: string): Promise<boolean> {
    return (await this.db.query('SELECT 1 FROM workspaces WHERE id = $1', [workspaceId])).rows.length > 0;
  }

  get(workspaceId: string): Promise<ForwardingSetup | undefined> {
    return readForwardingSetup(this.db, workspaceId);
  }

  /** Replaces the setup and records it in the audit log, in one transaction. */
  put(workspaceId: string, input: ForwardingSetupInput, actor = 'admin'): Promise<ForwardingSetup> {
    return this.db.transaction(async (tx) => {
      const stored = await writeForwardingSetup(tx, workspaceId, input);
      await audit(tx, workspaceId, 'forwarding.updated', { event_source_id: stored.event_source_id, pii_mode: stored.pii_mode, events: stored.events.map((e) => e.name) }, actor);
      return stored;
    });
  }
}
