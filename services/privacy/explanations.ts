/**
 * Reads a conversion's "why this field" record (enrich/explanation.ts builds it, the forwarder's filing stores it) with where it stands now: sent
 * (the sent ledger), waiting (the outbox), dead-lettered, or unknown (the ledger entry already expired). Live first:
 * a test-mode conversion with the same event_id is shown only when no live one exists. Past its retention it is
 * not shown even before the sweep deletes it.
 */
import { msInterval as ms, type Db } from '../shared/db/db.js';
import { expandExplanation, type CarriedExplanation, type ConversionExplanation, type PlatformEventRecord } from '../domain/conversion.js';
import { Topics } from '../shared/topics.js';

export interface ConversionWhy extends ConversionExplanation {
  readonly event_id: string;
  readonly key_mode: string;
  readonly built_at: string;
  readonly expires_at: string;
  readonly delivery: { readonly status: 'sent' | 'queued' | 'dead_lettered' | 'unknown'; readonly at: string | null; readonly platform_request_id: string | null };
  readonly record: PlatformEventRecord;
}

export class ExplanationRepo {
  constructor(
    private readonly db: Db,
    private readonly retentionMs: number,
  ) {}

  async get(workspaceId: string, eventId: string): Promise<ConversionWhy | null> {
    const r = await this.db.query<{
      key_mode: string;
      record: PlatformEventRecord;
      explanation: CarriedExplanation;
      created_at: Date | string;
      sent_at: Date | string | null;
      sent_request: string | null;
      enqueued_at: Date | string | null;
      dead_at: Date | string | null;
    }>(
      `SELECT x.key_mode, x.record, x.explanation, x.created_at,
              s.sent_at, s.request_id AS sent_request, o.enqueued_at,
              (SELECT l.appended_at FROM log_records l WHERE l.topic = $4 AND l.key = x.workspace_id || ':' || x.event_id
               ORDER BY l."offset" DESC LIMIT 1) AS dead_at
       FROM conversion_explanations x
       LEFT JOIN forward_sent s ON s.workspace_id = x.workspace_id AND s.event_id = CASE WHEN x.key_mode = 'test' THEN 'test:' || x.event_id ELSE x.event_id END
       LEFT JOIN forward_outbox o ON o.workspace_id = x.workspace_id AND o.event_id = CASE WHEN x.key_mode = 'test' THEN 'test:' || x.event_id ELSE x.event_id END
       WHERE x.workspace_id = $1 AND x.event_id = $2 AND x.created_at >= now() - ${ms('$3')}
       ORDER BY x.key_mode = 'live' DESC LIMIT 1`,
      [workspaceId, eventId, this.retentionMs, Topics.conversionsDlq],
    );
    const row = r.rows[0];
    if (!row) return null;
    const iso = (v: Date | string | null): string | null => (v === null ? null : new Date(v).toISOString());
    const builtAt = new Date(row.created_at).getTime();
    const delivery: ConversionWhy['delivery'] =
      row.sent_at !== null
        ? { status: 'sent', at: iso(row.sent_at), platform_request_id: row.sent_request }
        : row.enqueued_at !== null
          ? { status: 'queued', at: iso(row.enqueued_at), platform_request_id: null }
          : row.dead_at !== null
            ? { status: 'dead_lettered', at: iso(row.dead_at), platform_request_id: null }
            : { status: 'unknown', at: null, platform_request_id: null };
    return {
      event_id: eventId,
      key_mode: row.key_mode,
      built_at: new Date(builtAt).toISOString(),
      expires_at: new Date(builtAt + this.retentionMs).toISOString(),
      delivery,
      record: row.record,
      ...expandExplanation(row.explanation, row.record),
    };
  }
}
