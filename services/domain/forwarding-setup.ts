/**
 * A workspace's forwarding setup (operator contract, PUT /admin/v1/workspaces/{ws}/forwarding): which events
 * become conversions, under which platform event names, for which pixel, and how personal data is handled.
 * The console writes it; enrich reads it.
 */
import type { Sql } from '../shared/db/db.js';

export type PiiMode = 'hashed' | 'none';

export interface SelectedEvent {
  /** The sender's event name (event_name), matched exactly. */
  readonly name: string;
  /** The platform event it becomes, e.g. CompletePayment. */
  readonly platform_event: string;
}

export interface ForwardingSetupInput {
  readonly event_source: string;
  readonly event_source_id: string;
  readonly pii_mode: PiiMode;
  readonly click_window_days: number;
  readonly test_event_code?: string | null;
  readonly events: readonly SelectedEvent[];
}

export interface ForwardingSetup extends ForwardingSetupInput {
  readonly workspace_id: string;
  readonly test_event_code: string | null;
  readonly updated_at: string;
}

interface SetupRow {
  workspace_id: string;
  event_source: string;
  event_source_id: string;
  pii_mode: PiiMode;
  click_window_days: number;
  test_event_code: string | null;
  events: SelectedEvent[];
  updated_at: Date | string;
}

const COLUMNS = 'workspace_id, event_source, event_source_id, pii_mode, click_window_days, test_event_code, events, updated_at';

function fromRow(r: SetupRow): ForwardingSetup {
  return {
    workspace_id: r.workspace_id,
    event_source: r.event_source,
    event_source_id: r.event_source_id,
    pii_mode: r.pii_mode,
    click_window_days: Number(r.click_window_days),
    test_event_code: r.test_event_code,
    events: r.events,
    updated_at: new Date(r.updated_at).toISOString(),
  };
}

export async function readForwardingSetup(sql: Sql, workspaceId: string): Promise<ForwardingSetup | undefined> {
  const r = await sql.query<SetupRow>(`SELECT ${COLUMNS} FROM forwarding_setups WHERE workspace_id = $1`, [workspaceId]);
  return r.rows[0] && fromRow(r.rows[0]);
}

/** The setups of many workspaces in one query (a workspace without one is absent from the map). */
export async function readForwardingSetups(sql: Sql, workspaceIds: readonly string[]): Promise<Map<string, ForwardingSetup>> {
  const r = await sql.query<SetupRow>(`SELECT ${COLUMNS} FROM forwarding_setups WHERE workspace_id = ANY($1::text[])`, [workspaceIds]);
  return new Map(r.rows.map((row) => [row.workspace_id, fromRow(row)]));
}

/** Creates or replaces the setup as a whole (PUT semantics). */
export async function writeForwardingSetup(sql: Sql, workspaceId: string, s: ForwardingSetupInput): Promise<ForwardingSetup> {
  const r = await sql.query<SetupRow>(
    `INSERT INTO forwarding_setups (workspace_id, event_source, event_source_id, pii_mode, click_window_days, test_event_code, events, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, now())
     ON CONFLICT (workspace_id) DO UPDATE SET
       event_source = EXCLUDED.event_source, event_source_id = EXCLUDED.event_source_id, pii_mode = EXCLUDED.pii_mode,
       click_window_days = EXCLUDED.click_window_days, test_event_code = EXCLUDED.test_event_code,
       events = EXCLUDED.events, updated_at = now()
     RETURNING ${COLUMNS}`,
    [
      workspaceId,
      s.event_source,
      s.event_source_id,
      s.pii_mode,
      s.click_window_days,
      s.test_event_code ?? null,
      JSON.stringify(s.events.map((e) => ({ name: e.name, platform_event: e.platform_event }))),
    ],
  );
  return fromRow(r.rows[0]!);
}
