/** What the console's Activity page reads: activity_counts per day, dead letters, test events, the audit log. */
import type { Db } from '../../shared/db/db.js';
import { toNumber } from '../../shared/db/db.js';

export interface DailyTotals {
  readonly day: string;
  readonly delivered: number;
  readonly test_delivered: number;
  readonly failed: number;
  readonly dropped: number;
}

export interface Activity {
  readonly daily: DailyTotals[];
  /** Per day and key, for failed (platform code) and dropped (reason). */
  readonly failed: Array<{ day: string; key: string; n: number }>;
  readonly dropped: Array<{ day: string; key: string; n: number }>;
  /** The letters waiting (status dead), newest first. */
  readonly deadLetters: Array<{ id: string; failedAt: string; stage: string; reason: string; eventId: string | null; error: string; attempts: number }>;
  readonly testEvents: Array<{ sentAt: string; eventId: string; platformEvent: string | null; testEventCode: string }>;
  readonly audit: Array<{ at: string; actor: string; action: string }>;
}

const LIST_LIMIT = 50;

export class ActivityRepo {
  constructor(private readonly db: Db) {}

  async read(workspaceId: string, days: number, now = new Date()): Promise<Activity> {
    const since = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()) - (days - 1) * 86_400_000);
    const counts = await this.db.query<{ day: string; kind: string; key: string; n: unknown }>(
      `SELECT to_char(date_trunc('day', hour AT TIME ZONE 'UTC'), 'YYYY-MM-DD') AS day, kind, key, sum(n) AS n
       FROM activity_counts WHERE workspace_id = $1 AND hour >= $2 GROUP BY 1, 2, 3 ORDER BY 1 DESC, 2, 3`,
      [workspaceId, since.toISOString()],
    );
    const byDay = new Map<string, { delivered: number; test_delivered: number; failed: number; dropped: number }>();
    for (let i = 0; i < days; i++) {
      byDay.set(new Date(now.getTime() - i * 86_400_000).toISOString().slice(0, 10), { delivered: 0, test_delivered: 0, failed: 0, dropped: 0 });
    }
    const failed: Activity['failed'] = [];
    const dropped: Activity['dropped'] = [];
    for (const r of counts.rows) {
      const n = toNumber(r.n);
      const totals = byDay.get(r.day);
      if (totals && r.kind in totals) totals[r.kind as keyof typeof totals] += n;
      if (r.kind === 'failed') failed.push({ day: r.day, key: r.key, n });
      if (r.kind === 'dropped') dropped.push({ day: r.day, key: r.key, n });
    }

    // The workspace's dead letters waiting for someone (table dead_letters, both runtimes; docs/operations.md).
    const letters = await this.db.query<{ id: string; stage: string; reason: string; error: string | null; event_id: string | null; attempts: unknown; last_failed_at: unknown }>(
      `SELECT id, stage, reason, error, event_id, attempts, last_failed_at FROM dead_letters
       WHERE workspace_id = $1 AND status = 'dead' ORDER BY last_failed_at DESC, seq DESC LIMIT ${LIST_LIMIT}`,
      [workspaceId],
    );
    const deadLetters = letters.rows.map((l) => ({
      id: l.id,
      failedAt: new Date(l.last_failed_at as string).toISOString(),
      stage: l.stage,
      reason: l.reason,
      eventId: l.event_id,
      error: l.error ?? '',
      attempts: toNumber(l.attempts),
    }));

    const tests = await this.db.query<{ event_id: string; sent_at: unknown; platform_event: string | null; test_event_code: string }>(
      `SELECT event_id, sent_at, platform_event, test_event_code FROM forward_sent
       WHERE workspace_id = $1 AND test_event_code <> '' ORDER BY sent_at DESC LIMIT ${LIST_LIMIT}`,
      [workspaceId],
    );
    const audit = await this.db.query<{ at: unknown; actor: string; action: string }>(
      `SELECT at, actor, action FROM audit_log WHERE workspace_id = $1 ORDER BY at DESC, id DESC LIMIT ${LIST_LIMIT}`,
      [workspaceId],
    );
    return {
      daily: [...byDay].map(([day, t]) => ({ day, ...t })),
      failed,
      dropped,
      deadLetters,
      testEvents: tests.rows.map((t) => ({
        sentAt: new Date(t.sent_at as string).toISOString(),
        // The ledger id of a test conversion carries a `test:` prefix; the platform saw the id after it.
        eventId: t.event_id.replace(/^test:/, ''),
        platformEvent: t.platform_event,
        testEventCode: t.test_event_code,
      })),
      audit: audit.rows.map((a) => ({ at: new Date(a.at as string).toISOString(), actor: a.actor, action: a.action })),
    };
  }

  /** Event names the workspace has sent, most frequent first. */
  async eventNames(workspaceId: string): Promise<Array<{ name: string; count: number }>> {
    const r = await this.db.query<{ name: string; count: unknown }>(
      'SELECT name, count FROM workspace_event_names WHERE workspace_id = $1 ORDER BY count DESC, name LIMIT 500',
      [workspaceId],
    );
    return r.rows.map((e) => ({ name: e.name, count: toNumber(e.count) }));
  }
}

/** A small bar chart of delivered conversions per day, as inline SVG (no script, no inline style: CSP-safe). */
export function deliveredChart(daily: readonly DailyTotals[]): string {
  const days = [...daily].reverse();
  const max = Math.max(1, ...days.map((d) => d.delivered));
  const w = 40;
  const h = 100;
  const bars = days
    .map((d, i) => {
      const bh = Math.round((d.delivered / max) * h);
      return `<rect x="${i * w + 6}" y="${h - bh + 4}" width="${w - 12}" height="${bh}"></rect><text x="${i * w + w / 2}" y="${h + 18}" text-anchor="middle">${d.day.slice(5)}</text>`;
    })
    .join('');
  const total = days.reduce((a, d) => a + d.delivered, 0);
  return `<svg class="bars" role="img" aria-label="Delivered conversions per day: ${total} in total" viewBox="0 0 ${days.length * w} ${h + 24}" width="100%" height="140" preserveAspectRatio="xMinYMid meet">${bars}</svg>`;
}
