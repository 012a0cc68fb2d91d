/**
 * What the console shows about use, kept cheap for the ingestion path: each key's last-used time (written at most
 * once per LAST_USED_EVERY_MS per key and process) and the event names each workspace sends, with counts. Both are
 * gathered in memory and flushed every FLUSH_EVERY_MS as one statement each, never one write per request. A crash
 * loses at most one interval of these counts; events themselves are not affected.
 */
import type { Sql } from '../../shared/db/db.js';

export const LAST_USED_EVERY_MS = 60_000;
export const FLUSH_EVERY_MS = 2_000;
/** Longer names are not tallied (the schema allows them; the picker would not show them usefully). */
const MAX_NAME_LENGTH = 256;
/**
 * A key holder can send any number of distinct names: a workspace keeps at most this many, the most sent first (then
 * the most recent), so a flood of one-off names cannot push out the names a workspace really sends. The console's
 * Forwarding page lists the same number.
 */
export const MAX_EVENT_NAMES_PER_WORKSPACE = 500;
/** A name not sent for this long is forgotten. */
export const EVENT_NAME_MAX_AGE_DAYS = 30;

export class UsageRecorder {
  private readonly lastWritten = new Map<string, number>();
  private pendingKeys = new Map<string, Date>();
  private pendingNames = new Map<string, { workspaceId: string; name: string; count: number; at: Date }>();
  /** Distinct names pending per workspace: bounded like the table, so memory is too between flushes. */
  private pendingPerWorkspace = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly sql: Sql,
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {}

  keyUsed(keyId: string, now = Date.now()): void {
    const last = this.lastWritten.get(keyId);
    if (last !== undefined && now - last < LAST_USED_EVERY_MS) return;
    this.lastWritten.set(keyId, now);
    this.pendingKeys.set(keyId, new Date(now));
    this.schedule();
  }

  eventsSent(workspaceId: string, names: readonly string[], now = Date.now()): void {
    for (const name of names) {
      if (name.length === 0 || name.length > MAX_NAME_LENGTH) continue;
      const k = `${workspaceId}\u0000${name}`;
      const entry = this.pendingNames.get(k);
      if (entry) {
        entry.count++;
        entry.at = new Date(now);
        continue;
      }
      const distinct = this.pendingPerWorkspace.get(workspaceId) ?? 0;
      if (distinct >= MAX_EVENT_NAMES_PER_WORKSPACE) continue;
      this.pendingPerWorkspace.set(workspaceId, distinct + 1);
      this.pendingNames.set(k, { workspaceId, name, count: 1, at: new Date(now) });
    }
    if (names.length > 0) this.schedule();
  }

  /** Writes what is pending now (also called by the timer). */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.write()).catch(this.onError);
    return this.flushing;
  }

  close(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    return this.flush();
  }

  private schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, FLUSH_EVERY_MS);
    this.timer.unref();
  }

  private async write(): Promise<void> {
    const keys = this.pendingKeys;
    const names = [...this.pendingNames.values()];
    this.pendingKeys = new Map();
    this.pendingNames = new Map();
    this.pendingPerWorkspace = new Map();
    if (keys.size > 0) {
      await this.sql.query(
        `UPDATE api_keys k SET last_used_at = GREATEST(COALESCE(k.last_used_at, t.at), t.at)
         FROM unnest($1::text[], $2::timestamptz[]) AS t(id, at) WHERE k.id = t.id`,
        [[...keys.keys()], [...keys.values()].map((d) => d.toISOString())],
      );
    }
    if (names.length > 0) {
      await this.sql.query(
        `INSERT INTO workspace_event_names AS w (workspace_id, name, count, last_seen_at)
         SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[])
         ON CONFLICT (workspace_id, name) DO UPDATE
           SET count = w.count + EXCLUDED.count, last_seen_at = GREATEST(w.last_seen_at, EXCLUDED.last_seen_at)`,
        [names.map((n) => n.workspaceId), names.map((n) => n.name), names.map((n) => n.count), names.map((n) => n.at.toISOString())],
      );
      // The workspaces just written keep their bound: names past the cap, and names gone quiet, are dropped.
      await this.sql.query(
        `DELETE FROM workspace_event_names w USING (
           SELECT workspace_id, name, last_seen_at,
                  row_number() OVER (PARTITION BY workspace_id ORDER BY count DESC, last_seen_at DESC, name) AS rank
           FROM workspace_event_names WHERE workspace_id = ANY($1::text[])
         ) r
         WHERE w.workspace_id = r.workspace_id AND w.name = r.name
           AND (r.rank > $2 OR r.last_seen_at < now() - $3::integer * interval '1 day')`,
        [[...new Set(names.map((n) => n.workspaceId))], MAX_EVENT_NAMES_PER_WORKSPACE, EVENT_NAME_MAX_AGE_DAYS],
      );
    }
  }
}
