/**
 * Filing conversions into the outbox: the forwarder's intake stage (intake.ts) over either runtime. Inside the batch's
 * transaction it decides per conversion (planIntake), inserts the queued ones idempotently (a batch filed again finds
 * them queued or sent: nothing is sent twice), and says what became of each: queued, dropped with a reason, or a
 * dead letter for conversions.dlq.
 */
import { forFirstTiktok, ledgerEventId, type ConversionReady } from '../domain/conversion.js';
import type { Sql } from '../shared/db/db.js';
import { joinJsonTexts, splitJsonTexts, unchangingJsonText } from '../shared/db/json-texts.js';
import { erasedConversions } from '../enrich/identity/erasure-filter.js';
import { saveExplanations } from '../enrich/explanation.js';
import type { ConnectionStatus } from './connection-repo.js';
import { recordDeadLetters } from '../domain/dead-letter.js';
import { conversionLetterEntry, type ConversionDeadLetter } from './outbox-repo.js';
import { fileIntoDestinations } from './destinations/fan-out.js';

/** Why a conversions.ready value cannot be forwarded, or null when it can. */
export function conversionProblem(v: unknown): string | null {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return 'not an object';
  const c = v as Record<string, unknown>;
  const nonEmpty = (k: string): boolean => typeof c[k] === 'string' && (c[k] as string).length > 0;
  for (const k of ['workspace_id', 'event_id']) {
    if (!nonEmpty(k)) return `${k} is missing or empty`;
  }
  // Both empty: a conversion for the workspace's other destinations only (forFirstTiktok); one empty is a mistake.
  if (!(c.event_source === '' && c.event_source_id === '')) {
    for (const k of ['event_source', 'event_source_id']) if (!nonEmpty(k)) return `${k} is missing or empty`;
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



/**
 * A conversion that the workspace's forwarding setup did not select goes to its other destinations only: queued
 * there, or dropped as a duplicate (each one that selected it has it), or because none selects it any more.
 */
function otherDestinationsOnly(filing: 'queued' | 'duplicate' | undefined): { readonly action: 'filed_elsewhere' } | { readonly action: 'drop'; readonly reason: string } {
  if (filing === 'queued') return { action: 'filed_elsewhere' };
  return { action: 'drop', reason: filing === 'duplicate' ? 'already_sent' : 'not_selected' };
}

export interface IntakeItem {
  readonly key: string;
  /** The conversion as read (or what could be read of it). */
  readonly value: unknown;
  /** Where it was read, for the dead letter: `offset 12` or `partition 3 offset 12`. */
  readonly position: string;
  /** Set when the record could not be decoded at all. */
  readonly undecodable?: string;
}

/**
 * Which of the conversions ($1 workspaces, $2 ledger ids) the sent ledger holds (sent since $3, ms, when not null):
 * one primary-key lookup per conversion, whatever the planner knows of the ledger. As a join, a ledger without
 * statistics (PGlite has no autovacuum) was hashed whole at every batch, a cost that grew with every conversion sent;
 * LIMIT 1 keeps the planner from turning the lateral lookup back into that join.
 */
export const SENT_LOOKUP = `SELECT s.workspace_id, s.event_id FROM unnest($1::text[], $2::text[]) AS t(w, e)
  CROSS JOIN LATERAL (
    SELECT s.workspace_id, s.event_id FROM forward_sent s
    WHERE s.workspace_id = t.w AND s.event_id = t.e
      AND ($3::double precision IS NULL OR s.sent_at >= to_timestamp($3::double precision / 1000.0))
    LIMIT 1) AS s`;

/** What became of one item, in the order of the items. */
export type Filed =
  | { readonly kind: 'queued' }
  | { readonly kind: 'dropped'; readonly reason: string }
  | { readonly kind: 'dead_lettered'; readonly letter: ConversionDeadLetter };

export interface IntakeCount {
  readonly workspace: string;
  readonly outcome: 'parked' | 'dropped' | 'dead_lettered';
  readonly code: string;
}


export interface FilingOptions {
  /**
   * A replay with `resend` (services/replay): ledger entries written before this time (epoch ms, the replay's
   * creation) do not count as sent, so those conversions go again; entries written since still do.
   */
  readonly resendSentBefore?: number;
}

export async function fileIntoOutbox(
  tx: Sql,
  items: readonly IntakeItem[],
  now: number,
  opts: FilingOptions = {},
): Promise<{ counted: IntakeCount[]; filed: Filed[] }> {
  const counted: IntakeCount[] = [];
  const filed: Filed[] = new Array(items.length);
  const readable = items
    .filter((r) => !r.undecodable && conversionProblem(r.value) === null)
    .map((r) => r.value as ConversionReady);
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
    const s = await tx.query<{ workspace_id: string; event_id: string }>(SENT_LOOKUP, [
      readable.map((c) => c.workspace_id),
      readable.map(ledgerEventId),
      opts.resendSentBefore ?? null,
    ]);
    for (const row of s.rows) sent.add(`${row.workspace_id}\n${row.event_id}`);
  }

  // Built from an erased person's events before the erasure (docs/privacy.md): never queued.
  const erasedFlags = await erasedConversions(tx, readable);
  const erased = new Set(readable.filter((_, n) => erasedFlags[n]).map((c) => `${c.workspace_id}\n${ledgerEventId(c)}`));

  const kept = readable.filter((c) => !erased.has(`${c.workspace_id}\n${ledgerEventId(c)}`));
  // The "why this field" records, with the filing: an erased person's never come back.
  await saveExplanations(tx, kept);
  // The workspace's other destinations, each with its own outbox and ledger (destinations/fan-out.ts).
  const elsewhere = await fileIntoDestinations(tx, kept, opts);

  const toQueue: Array<{ c: ConversionReady; id: string; parked: boolean; at: number }> = [];
  items.forEach((item, at) => {
    const v = (item.value ?? {}) as Partial<ConversionReady>;
    const ws = typeof v.workspace_id === 'string' ? v.workspace_id : '';
    const id = item.undecodable || conversionProblem(item.value) !== null ? '' : ledgerEventId(item.value as ConversionReady);
    const decision = item.undecodable
      ? ({ action: 'dlq', reason: `undecodable: ${item.undecodable}` } as const)
      : erased.has(`${ws}\n${id}`)
        ? ({ action: 'drop', reason: 'erased' } as const)
        : id !== '' && !forFirstTiktok(item.value as ConversionReady)
          ? otherDestinationsOnly(elsewhere.get(`${ws}\n${id}`))
          : planIntake(item.value, statuses.get(ws), sent.has(`${ws}\n${id}`));
    if (decision.action === 'filed_elsewhere') {
      filed[at] = { kind: 'queued' };
      return;
    }
    if (decision.action === 'queue') toQueue.push({ c: item.value as ConversionReady, id, parked: decision.parked, at });
    else if (decision.action === 'drop') {
      filed[at] = { kind: 'dropped', reason: decision.reason };
      counted.push({ workspace: ws, outcome: 'dropped', code: decision.reason });
    } else {
      filed[at] = { kind: 'dead_lettered', letter: invalidLetter(item, decision.reason, now) };
      counted.push({ workspace: ws || 'unknown', outcome: 'dead_lettered', code: 'invalid_conversion' });
    }
  });

  if (toQueue.length > 0) {
    const ins = await tx.query<{ workspace_id: string; event_id: string }>(
      `INSERT INTO forward_outbox (workspace_id, event_id, event_source, event_source_id, test_event_code, record, received_at, request_id)
       SELECT w, e, s, p, t, r::json, to_timestamp(at / 1000.0), q
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], ${splitJsonTexts('$6')}, $7::double precision[], $8::text[])
         AS u(w, e, s, p, t, r, at, q)
       ON CONFLICT (workspace_id, event_id) DO NOTHING
       RETURNING workspace_id, event_id`,
      [
        toQueue.map((q) => q.c.workspace_id),
        toQueue.map((q) => q.id),
        toQueue.map((q) => q.c.event_source),
        toQueue.map((q) => q.c.event_source_id),
        toQueue.map((q) => q.c.test_event_code ?? ''),
        // The records as one text of JSON documents, not a json[] (each escaped into the array's text): json-texts.ts.
        joinJsonTexts(toQueue.map((q) => unchangingJsonText(q.c.record))),
        toQueue.map((q) => q.c.received_at),
        toQueue.map((q) => (typeof q.c.request_id === 'string' ? q.c.request_id : null)),
      ],
    );
    const inserted = new Set(ins.rows.map((r) => `${r.workspace_id}\n${r.event_id}`));
    for (const q of toQueue) {
      const k = `${q.c.workspace_id}\n${q.id}`;
      if (!inserted.has(k)) {
        filed[q.at] = { kind: 'dropped', reason: 'already_queued' };
        counted.push({ workspace: q.c.workspace_id, outcome: 'dropped', code: 'already_queued' });
      } else {
        inserted.delete(k); // a second copy in the same batch is a duplicate
        filed[q.at] = { kind: 'queued' };
        if (q.parked) counted.push({ workspace: q.c.workspace_id, outcome: 'parked', code: statuses.get(q.c.workspace_id) ?? 'not_connected' });
      }
    }
  }
  // The queryable rows of the dead letters (domain/dead-letter.ts), in the batch's transaction.
  await recordDeadLetters(
    tx,
    filed.flatMap((f, at) => (f.kind === 'dead_lettered' ? [conversionLetterEntry(f.letter, items[at]!.position)] : [])),
  );
  return { counted, filed };
}

function invalidLetter(item: IntakeItem, reason: string, now: number): ConversionDeadLetter {
  const v = (typeof item.value === 'object' && item.value !== null ? item.value : {}) as Record<string, unknown>;
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
    platform_message: `conversions.ready record at ${item.position} cannot be forwarded: ${reason}`,
    request_id: null,
    record: item.value,
    failed_at: now,
  };
}
