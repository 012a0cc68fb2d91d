/**
 * Fan-out: inside the intake's transaction, each conversion is filed once more for every destination of its
 * workspace that selected its event, in that destination's own outbox, with the platform event its mapping names.
 * A destination's ledger decides alone whether it already has a conversion, so one destination catching up never
 * sends anything twice, whatever the others did.
 */
import type { ConversionReady } from '../../domain/conversion.js';
import type { Sql } from '../../shared/db/db.js';
import { readForwardingSetups } from '../../domain/forwarding-setup.js';
import type { ConnectionStatus } from '../connection-repo.js';
import { sourceEventOf } from '../outbox-repo.js';
import { ledgerEventId } from '../../domain/conversion.js';
import type { DestinationSetup } from './repo.js';

export interface FanOutDestination {
  readonly id: string;
  readonly workspace_id: string;
  readonly status: ConnectionStatus;
  /** False until the destination's first connection: its conversions wait for it, as the TikTok one's do. */
  readonly ever_connected: boolean;
  readonly setup: DestinationSetup;
}

export type FanOutDecision =
  | { readonly action: 'queue'; readonly platformEvent: string; readonly testEventCode: string }
  | { readonly action: 'skip'; readonly reason: 'not_selected' | 'disconnected' | 'test_mode_without_test_event_code' | 'unknown_event_name' };

/** What one destination does with one conversion, given the sender's event name behind it. */
export function planFanOut(c: Pick<ConversionReady, 'key_mode'>, eventName: string | null, d: FanOutDestination): FanOutDecision {
  // Disconnected by an admin: nothing goes there. Never connected yet: conversions wait for the first connection.
  if (d.status === 'disconnected' && d.ever_connected) return { action: 'skip', reason: 'disconnected' };
  if (eventName === null) return { action: 'skip', reason: 'unknown_event_name' };
  const m = d.setup.events.find((e) => e.name === eventName);
  if (!m) return { action: 'skip', reason: 'not_selected' };
  if (c.key_mode === 'test') {
    if (!d.setup.test_event_code) return { action: 'skip', reason: 'test_mode_without_test_event_code' };
    return { action: 'queue', platformEvent: m.platform_event, testEventCode: d.setup.test_event_code };
  }
  return { action: 'queue', platformEvent: m.platform_event, testEventCode: '' };
}

/** What a destination's batches are grouped by: Meta's pixel, a TikTok destination's event source id (its pixel). */
function batchSourceOf(setup: DestinationSetup): string {
  if (typeof setup.pixel_id === 'string') return setup.pixel_id;
  return typeof setup.event_source_id === 'string' ? setup.event_source_id : '';
}

/**
 * What became of the conversions that at least one destination selected, by `workspace\nledger id`: `queued` for
 * some destination, or `duplicate` (every destination that selected it has it already, sent or waiting).
 */
export type DestinationFiling = Map<string, 'queued' | 'duplicate'>;

/**
 * Queues each conversion ($1 destination, $2 workspace, $3 ledger id, …) in its destination's outbox, unless the
 * destination's ledger has it (sent since $9, ms, when not null). OFFSET 0 keeps the ledger check a primary-key
 * lookup per conversion: pulled up into an anti-join, a ledger without statistics (PGlite has no autovacuum) was
 * hashed whole at every batch, a cost that grew with every conversion sent.
 */
export const DESTINATION_FILING = `INSERT INTO destination_outbox (destination_id, workspace_id, event_id, event_source_id, test_event_code, record, received_at, request_id)
  SELECT d, w, e, p, t, r, to_timestamp(at / 1000.0), q
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::json[], $7::double precision[], $8::text[])
    AS u(d, w, e, p, t, r, at, q)
  WHERE NOT EXISTS (
    SELECT 1 FROM destination_sent s WHERE s.destination_id = u.d AND s.event_id = u.e
      AND ($9::double precision IS NULL OR s.sent_at >= to_timestamp($9::double precision / 1000.0))
    OFFSET 0)
  ON CONFLICT (destination_id, event_id) DO NOTHING
  RETURNING workspace_id, event_id`;

/** Files the conversions for their workspaces' destinations. */
export async function fileIntoDestinations(
  tx: Sql,
  conversions: readonly ConversionReady[],
  opts: { readonly resendSentBefore?: number } = {},
): Promise<DestinationFiling> {
  const filing: DestinationFiling = new Map();
  const workspaces = [...new Set(conversions.map((c) => c.workspace_id))];
  if (workspaces.length === 0) return filing;
  const d = await tx.query<FanOutDestination & { setup: DestinationSetup | string }>(
    `SELECT id, workspace_id, status, setup, connected_at IS NOT NULL AS ever_connected FROM destinations WHERE workspace_id = ANY($1::text[])`,
    [workspaces],
  );
  if (d.rows.length === 0) return filing;
  const byWorkspace = new Map<string, FanOutDestination[]>();
  for (const row of d.rows) {
    const dest = { ...row, setup: typeof row.setup === 'string' ? (JSON.parse(row.setup) as DestinationSetup) : row.setup };
    byWorkspace.set(row.workspace_id, [...(byWorkspace.get(row.workspace_id) ?? []), dest]);
  }
  // Conversions built before enrich recorded the sender's event name: the workspace's setup maps it back.
  const unnamed = [...new Set(conversions.filter((c) => !c.event_name && byWorkspace.has(c.workspace_id)).map((c) => c.workspace_id))];
  const legacy = unnamed.length > 0 ? await readForwardingSetups(tx, unnamed) : new Map();

  const queue: Array<{ c: ConversionReady; dest: FanOutDestination; id: string; platformEvent: string; testEventCode: string }> = [];
  for (const c of conversions) {
    const eventName = c.event_name ?? sourceEventOf(legacy.get(c.workspace_id), c.record);
    for (const dest of byWorkspace.get(c.workspace_id) ?? []) {
      const plan = planFanOut(c, eventName, dest);
      if (plan.action === 'queue') queue.push({ c, dest, id: ledgerEventId(c), platformEvent: plan.platformEvent, testEventCode: plan.testEventCode });
    }
  }
  if (queue.length === 0) return filing;
  for (const q of queue) filing.set(`${q.c.workspace_id}\n${q.id}`, 'duplicate');
  const ins = await tx.query<{ workspace_id: string; event_id: string }>(
    DESTINATION_FILING,
    [
      queue.map((q) => q.dest.id),
      queue.map((q) => q.c.workspace_id),
      queue.map((q) => q.id),
      queue.map((q) => batchSourceOf(q.dest.setup)),
      queue.map((q) => q.testEventCode),
      queue.map((q) => JSON.stringify({ ...q.c.record, event: q.platformEvent })),
      queue.map((q) => q.c.received_at),
      queue.map((q) => (typeof q.c.request_id === 'string' ? q.c.request_id : null)),
      opts.resendSentBefore ?? null,
    ],
  );
  for (const row of ins.rows) filing.set(`${row.workspace_id}\n${row.event_id}`, 'queued');
  return filing;
}
