/**
 * conversion_date_time: the event's time in the ad account's time zone (stored with the connection), formatted
 * `yyyy-mm-dd hh:mm:ss±hh:mm`. No connection or no time zone: UTC, `+00:00` (docs/pipeline.md).
 */
import type { Sql } from '../shared/db/db.js';
import { timeZoneFallbacks } from './metrics.js';

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string): Intl.DateTimeFormat | undefined {
  let f = formatters.get(timeZone);
  if (!f) {
    try {
      f = new Intl.DateTimeFormat('en-US', {
        timeZone,
        hourCycle: 'h23',
        year: 'numeric',
        month: '2-digit',
        day: '2-digit',
        hour: '2-digit',
        minute: '2-digit',
        second: '2-digit',
      });
    } catch {
      return undefined;
    }
    formatters.set(timeZone, f);
  }
  return f;
}

export const isValidTimeZone = (timeZone: string): boolean => formatterFor(timeZone) !== undefined;

const pad = (n: number, width = 2): string => String(Math.abs(n)).padStart(width, '0');

/** The last second formatted per zone: conversions of one batch mostly share their second. */
const lastFormatted = new Map<string, { seconds: number; text: string }>();

/** Formats epoch ms in an IANA time zone. Throws on an unknown zone (callers check isValidTimeZone). */
export function formatInTimeZone(epochMs: number, timeZone: string): string {
  const seconds = Math.floor(epochMs / 1000) * 1000;
  const last = lastFormatted.get(timeZone);
  if (last?.seconds === seconds) return last.text;
  const text = format(seconds, timeZone);
  if (lastFormatted.size >= 1_000) lastFormatted.clear();
  lastFormatted.set(timeZone, { seconds, text });
  return text;
}

function format(seconds: number, timeZone: string): string {
  const f = formatterFor(timeZone);
  if (!f) throw new RangeError(`unknown time zone ${timeZone}`);
  const parts = Object.fromEntries(f.formatToParts(new Date(seconds)).map((p) => [p.type, p.value]));
  const [y, mo, d, h, mi, s] = ['year', 'month', 'day', 'hour', 'minute', 'second'].map((k) => Number(parts[k]));
  // The zone's offset at that instant: the wall-clock reading taken as UTC, minus the instant itself.
  const offsetMinutes = Math.round((Date.UTC(y!, mo! - 1, d!, h!, mi!, s!) - seconds) / 60_000);
  const sign = offsetMinutes < 0 ? '-' : '+';
  const offset = `${sign}${pad(Math.trunc(offsetMinutes / 60))}:${pad(offsetMinutes % 60)}`;
  return `${pad(y!, 4)}-${pad(mo!)}-${pad(d!)} ${pad(h!)}:${pad(mi!)}:${pad(s!)}${offset}`;
}

/** Each workspace's connection time zone, or UTC when there is none or it is not a known IANA zone (one query). */
export async function accountTimeZones(sql: Sql, workspaceIds: readonly string[]): Promise<Map<string, string>> {
  const r = await sql.query<{ workspace_id: string; time_zone: string | null }>(
    'SELECT workspace_id, time_zone FROM connections WHERE workspace_id = ANY($1::text[])',
    [workspaceIds],
  );
  const found = new Map(r.rows.map((row) => [row.workspace_id, row.time_zone]));
  const out = new Map<string, string>();
  for (const ws of workspaceIds) {
    const tz = found.get(ws);
    if (!tz) {
      timeZoneFallbacks.inc({ reason: found.has(ws) ? 'no_time_zone' : 'no_connection' });
      out.set(ws, 'UTC');
    } else if (!isValidTimeZone(tz)) {
      timeZoneFallbacks.inc({ reason: 'unknown_time_zone' });
      out.set(ws, 'UTC');
    } else out.set(ws, tz);
  }
  return out;
}
