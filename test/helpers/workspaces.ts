/** Workspaces with a forwarding setup (and optionally a connection time zone) written straight to the store. */
import type { Db } from '../../services/shared/db/db.js';
import { writeForwardingSetup, type ForwardingSetupInput } from '../../services/domain/forwarding-setup.js';
import { randomBase62 } from '../../services/shared/ids.js';

export const SETUP: ForwardingSetupInput = {
  event_source: 'WEB',
  event_source_id: 'PIXEL123',
  pii_mode: 'hashed',
  click_window_days: 7,
  test_event_code: 'TEST123',
  events: [
    { name: 'purchase', platform_event: 'CompletePayment' },
    { name: 'sign_up', platform_event: 'CompleteRegistration' },
  ],
};

export interface WorkspaceOpts {
  /** Overrides of the setup; null: no setup at all. */
  readonly setup?: Partial<ForwardingSetupInput> | null;
  /** The connection's time zone; undefined: no connection row. */
  readonly timeZone?: string | null;
}

export async function seedWorkspace(db: Db, opts: WorkspaceOpts = {}): Promise<string> {
  const id = `ws_${randomBase62(10)}`;
  await db.query('INSERT INTO workspaces (id, name, plan) VALUES ($1, $2, $3)', [id, 'test', 'free']);
  if (opts.setup !== null) await writeForwardingSetup(db, id, { ...SETUP, ...opts.setup });
  if (opts.timeZone !== undefined) {
    await db.query('INSERT INTO connections (workspace_id, status, time_zone) VALUES ($1, $2, $3)', [id, 'connected', opts.timeZone]);
  }
  return id;
}
