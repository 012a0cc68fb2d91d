/**
 * The forwarder's intake: reads conversions.ready after the committed offset of consumer group `forwarder` and, in
 * ONE transaction with the new offset, files each conversion into the outbox of its connection. A crash either
 * commits a whole batch or none of it. Per conversion (planIntake):
 *  - already in the sent ledger, or already waiting: dropped as a duplicate (a replay never sends twice);
 *  - the workspace disconnected: dropped and counted (disconnecting stops forwarding);
 *  - connected: queued for the sender;
 *  - needs_reauth, or never connected: queued and parked until the workspace connects;
 *  - unreadable: dead-lettered on conversions.dlq.
 * An advisory lock serialises intake transactions, so on Postgres several forwarder replicas may run this loop.
 */
import type { Db } from '../shared/db/db.js';
import { toNumber } from '../shared/db/db.js';
import type { ConversionReady } from '../shared/conversion.js';
import type { Logger } from '../shared/logger.js';
import { appendInTransaction, type EmbeddedLog, type StoredRecord } from '../shared/runtime/embedded-log.js';
import { Topics } from '../shared/topics.js';
import { forwardedConversions } from './metrics.js';
import type { ConnectionStatus } from './connection-repo.js';
import type { ConversionDeadLetter } from './outbox-repo.js';

export const INTAKE_GROUP = 'forwarder';
const INTAKE_LOCK = 7_312_404;

/** Why a conversions.ready value cannot be forwarded, or null when it can. */
export function conversionProblem(v: unknown): string | null {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return 'not an object';
  const c = v as Record<string, unknown>;
  const nonEmpty = (k: string): boolean => typeof c[k] === 'string' && (c[k] as string).length > 0;
  for (const k of ['workspace_id', 'event_id', 'event_source', 'event_source_id']) {
    if (!nonEmpty(k)) return `${k} is missing or empty`;
  }
  if (c.test_event_code !== null && c.test_event_code !== undefined && typeof c.test_event_code !== 'string') {
    return 'test_event_code must be a string or null';
  }
  if (typeof c.received_at !== 'number' || !Number.isFinite(c.received_at)) return 'received_at must be epoch milliseconds';
  const record = c.record as Record<string, unknown> | null;
  if (typeof record !== 'object' || record === null || Array.isArray(record)) return 'record is missing';
  if (record.event_id !== c.event_id) return 'record.event_id differs from event_id';
  return null;
}

export type IntakeDecision =
  | { readonly action: 'queue'; readonly parked: boolean }
  | { readonly action: 'drop'; readonly reason: 'disconnected' | 'already_sent' }
  | { readonly action: 'dlq'; readonly reason: string };

/** The decision for one conversion, from its workspace's connection status and the sent ledger. */
export function planIntake(value: unknown, status: ConnectionStatus | undefined, alreadySent: boolean): IntakeDecision {
  const problem = conversionProblem(value);
  if (problem) return { action: 'dlq', reason: problem };
  if (status === 'disconnected') return { action: 'drop', reason: 'disconnected' };
  if (alreadySent) return { action: 'drop', reason: 'already_sent' };
  return { action: 'queue', parked: status !== 'connected' };
}

interface Counted {
  workspace: string;
  outcome: 'parked' | 'dropped' | 'dead_lettered';
  code: string;
}

export class ConversionIntake {
  private stopped = false;
  private readonly abort = new AbortController();
  private running: Promise<void> | undefined;

  constructor(
    private readonly deps: {
      readonly db: Db;
      readonly log: EmbeddedLog;
      readonly logger: Logger;
      readonly batchSize?: number;
      readonly idleWaitMs?: number;
      /** Called after each committed batch that queued something (wakes the sender). */
      readonly onQueued?: () => void;
      readonly now?: () => number;
    },
  ) {}

  start(): void {
    this.running ??= this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    await this.running;
  }

  /** Files everything there is into the outbox (tests, shutdown). Returns how many records it consumed. */
  async drain(): Promise<number> {
    let total = 0;
    for (;;) {
      const n = await this.step();
      if (n === 0) return total;
      total += n;
    }
  }

  private async run(): Promise<void> {
    let backoff = 100;
    while (!this.stopped) {
      try {
        const n = await this.step();
        backoff = 100;
        if (n === 0) await this.deps.log.waitForAppend(Topics.conversionsReady, this.deps.idleWaitMs ?? 500, this.abort.signal);
      } catch (err) {
        this.deps.logger.error({ err }, 'forwarder intake failed; retrying');
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 5_000);
      }
    }
  }

  /** One batch in one transaction. Returns how many conversions.ready records it consumed. */
  async step(): Promise<number> {
    const { db, log } = this.deps;
    const now = (this.deps.now ?? Date.now)();
    const counted: Counted[] = [];
    let queued = 0;
    const consumed = await db.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock($1)', [INTAKE_LOCK]);
      const off = await tx.query<{ offset: unknown }>(
        'SELECT "offset" FROM consumer_offsets WHERE group_id = $1 AND topic = $2',
        [INTAKE_GROUP, Topics.conversionsReady],
      );
      const from = off.rows[0] ? toNumber(off.rows[0].offset) : 0;
      const batch: StoredRecord<unknown>[] = await log.read(Topics.conversionsReady, from, this.deps.batchSize ?? 500, tx);
      if (batch.length === 0) return 0;

      const readable = batch.filter((r) => conversionProblem(r.value) === null).map((r) => r.value as ConversionReady);
      const workspaces = [...new Set(readable.map((c) => c.workspace_id))];
      const statuses = new Map<string, ConnectionStatus>();
      if (workspaces.length > 0) {
        const s = await tx.query<{ workspace_id: string; status: ConnectionStatus }>(
          'SELECT workspace_id, status FROM connections WHERE workspace_id = ANY($1::text[])',
          [workspaces],
        );
        for (const row of s.rows) statuses.set(row.workspace_id, row.status);
      }
      const sent = new Set<string>();
      if (readable.length > 0) {
        const s = await tx.query<{ workspace_id: string; event_id: string }>(
          `SELECT s.workspace_id, s.event_id FROM forward_sent s
           JOIN unnest($1::text[], $2::text[]) AS t(w, e) ON s.workspace_id = t.w AND s.event_id = t.e`,
          [readable.map((c) => c.workspace_id), readable.map((c) => c.event_id)],
        );
        for (const row of s.rows) sent.add(`${row.workspace_id}\n${row.event_id}`);
      }

      const toQueue: Array<{ c: ConversionReady; parked: boolean }> = [];
      const letters: Array<{ key: string; value: ConversionDeadLetter }> = [];
      for (const stored of batch) {
        const v = stored.value as Partial<ConversionReady>;
        const ws = typeof v?.workspace_id === 'string' ? v.workspace_id : '';
        const decision = planIntake(stored.value, statuses.get(ws), sent.has(`${ws}\n${String(v?.event_id)}`));
        if (decision.action === 'queue') toQueue.push({ c: stored.value as ConversionReady, parked: decision.parked });
        else if (decision.action === 'drop') counted.push({ workspace: ws, outcome: 'dropped', code: decision.reason });
        else {
          letters.push({ key: stored.key, value: invalidLetter(stored, decision.reason, now) });
          counted.push({ workspace: ws || 'unknown', outcome: 'dead_lettered', code: 'invalid_conversion' });
        }
      }

      if (toQueue.length > 0) {
        const ins = await tx.query<{ workspace_id: string; event_id: string }>(
          `INSERT INTO forward_outbox (workspace_id, event_id, event_source, event_source_id, test_event_code, record, received_at)
           SELECT w, e, s, p, t, r, to_timestamp(at / 1000.0)
           FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::jsonb[], $7::double precision[])
             AS u(w, e, s, p, t, r, at)
           ON CONFLICT (workspace_id, event_id) DO NOTHING
           RETURNING workspace_id, event_id`,
          [
            toQueue.map((q) => q.c.workspace_id),
            toQueue.map((q) => q.c.event_id),
            toQueue.map((q) => q.c.event_source),
            toQueue.map((q) => q.c.event_source_id),
            toQueue.map((q) => q.c.test_event_code ?? ''),
            toQueue.map((q) => JSON.stringify(q.c.record)),
            toQueue.map((q) => q.c.received_at),
          ],
        );
        const inserted = new Set(ins.rows.map((r) => `${r.workspace_id}\n${r.event_id}`));
        for (const q of toQueue) {
          const k = `${q.c.workspace_id}\n${q.c.event_id}`;
          if (!inserted.has(k)) {
            counted.push({ workspace: q.c.workspace_id, outcome: 'dropped', code: 'already_queued' });
          } else {
            inserted.delete(k); // a second copy in the same batch is a duplicate
            queued++;
            if (q.parked) counted.push({ workspace: q.c.workspace_id, outcome: 'parked', code: statuses.get(q.c.workspace_id) ?? 'not_connected' });
          }
        }
      }
      if (letters.length > 0) await appendInTransaction(tx, new Map([[Topics.conversionsDlq, letters]]));
      await tx.query(
        `INSERT INTO consumer_offsets (group_id, topic, "offset", updated_at) VALUES ($1, $2, $3, now())
         ON CONFLICT (group_id, topic) DO UPDATE SET "offset" = EXCLUDED."offset", updated_at = now()`,
        [INTAKE_GROUP, Topics.conversionsReady, batch[batch.length - 1]!.offset],
      );
      return batch.length;
    });
    for (const c of counted) forwardedConversions.inc({ workspace: c.workspace, outcome: c.outcome, code: c.code });
    if (queued > 0) this.deps.onQueued?.();
    return consumed;
  }
}

function invalidLetter(stored: StoredRecord<unknown>, reason: string, now: number): ConversionDeadLetter {
  const v = (typeof stored.value === 'object' && stored.value !== null ? stored.value : {}) as Record<string, unknown>;
  const str = (k: string): string | null => (typeof v[k] === 'string' ? (v[k] as string) : null);
  return {
    stage: 'forwarder',
    reason: 'invalid_conversion',
    workspace_id: str('workspace_id') ?? '',
    event_id: str('event_id') ?? '',
    event_source: str('event_source'),
    event_source_id: str('event_source_id'),
    test_event_code: str('test_event_code'),
    platform_code: null,
    platform_message: `conversions.ready record at offset ${stored.offset} cannot be forwarded: ${reason}`,
    request_id: null,
    record: stored.value,
    failed_at: now,
  };
}

