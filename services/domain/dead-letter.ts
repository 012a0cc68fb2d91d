/**
 * Dead letters. The record every runtime writes on events.dlq for a record a stage could not process (DeadLetter),
 * and the queryable copy of every letter, stage or forwarder, in the `dead_letters` table (migration 0009), which the
 * admin API lists, redrives and discards (services/datateam). A letter's row is written in the same database
 * transaction that produces the letter, so the list never misses one and never shows one that was not written.
 */
import type { Sql } from '../shared/db/db.js';
import { eventIdOf } from './event-id.js';
import type { EventEnvelope } from './envelope.js';
import { newId } from '../shared/ids.js';
import { Topics } from '../shared/topics.js';

export interface DeadLetter {
  readonly stage: string;
  readonly reason: string;
  readonly error: string | null;
  readonly source_topic: string;
  readonly source_partition: number;
  readonly source_offset: string;
  readonly key: string;
  readonly value: unknown;
  readonly failed_at: number;
}

/** One row of dead_letters as a writer hands it over. */
export interface DeadLetterEntry {
  readonly workspaceId: string;
  readonly stage: string;
  /** Which dead-letter topic the letter went to. */
  readonly topic: typeof Topics.eventsDlq | typeof Topics.conversionsDlq;
  /** What the letter is about, stable across redrives (a stage record's key; a conversion's ledger event id). */
  readonly origin: string;
  /** Where it failed this time: the same source again is the same failure (a batch processed again), not a new one. */
  readonly source: string;
  readonly eventId: string | null;
  readonly reason: string;
  readonly error: string | null;
  /** The letter as written on its topic (envelope or conversion inside): what a redrive sends back. */
  readonly value: unknown;
  readonly failedAt: number;
  /** The sender's event name behind a conversion letter, when known. */
  readonly sourceEvent?: string | null;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The workspace and event id a stage record is about, from what can be read of it (an envelope or a conversion). */
function aboutRecord(key: string, value: unknown): { workspaceId: string; eventId: string | null } {
  const keyWorkspace = key.includes(':') ? key.slice(0, key.indexOf(':')) : '';
  if (!isObject(value)) return { workspaceId: keyWorkspace, eventId: null };
  const workspaceId = typeof value.workspace_id === 'string' && value.workspace_id !== '' ? value.workspace_id : keyWorkspace;
  if (typeof value.event_id === 'string') return { workspaceId, eventId: value.event_id }; // a conversion
  let eventId: string | null = null;
  try {
    if (typeof value.name === 'string' && isObject(value.payload)) eventId = eventIdOf(value as unknown as EventEnvelope);
  } catch {
    eventId = null; // not enough of an envelope to derive it
  }
  return { workspaceId, eventId };
}

/** The dead_letters row of a stage's letter on events.dlq. */
export function entryOfStageLetter(letter: DeadLetter): DeadLetterEntry {
  const source = `${letter.source_topic}/${letter.source_partition}/${letter.source_offset}`;
  const { workspaceId, eventId } = aboutRecord(letter.key, letter.value);
  return {
    workspaceId,
    stage: letter.stage,
    topic: Topics.eventsDlq,
    origin: letter.key !== '' ? letter.key : source,
    source,
    eventId,
    reason: letter.reason,
    error: letter.error,
    value: letter,
    failedAt: letter.failed_at,
  };
}

/**
 * Upserts the letters' rows in one statement: a new origin is a new row (attempts 1); an origin met again from a new
 * source is the same record failing again (attempts + 1, dead again, the latest error); from the same source it is
 * the same failure written again (a batch processed again after a crash) and changes nothing but the copy.
 */
export async function recordDeadLetters(sql: Sql, entries: readonly DeadLetterEntry[]): Promise<void> {
  if (entries.length === 0) return;
  // One row per conflict key in a statement (ON CONFLICT cannot touch a row twice): the last letter wins.
  const byKey = new Map<string, DeadLetterEntry>();
  for (const e of entries) byKey.set(JSON.stringify([e.topic, e.stage, e.workspaceId, e.origin]), e);
  const rows = [...byKey.values()].map((e) => ({
    id: newId('dl'),
    w: e.workspaceId,
    st: e.stage,
    t: e.topic,
    o: e.origin,
    s: e.source,
    e: e.eventId,
    r: e.reason,
    er: e.error,
    se: e.sourceEvent ?? null,
    v: e.value,
    at: e.failedAt,
  }));
  await sql.query(
    `INSERT INTO dead_letters AS d (id, workspace_id, stage, topic, origin, source, event_id, reason, error, source_event, value,
                                    first_failed_at, last_failed_at)
     SELECT x->>'id', x->>'w', x->>'st', x->>'t', x->>'o', x->>'s', x->>'e', x->>'r', x->>'er', x->>'se', x->'v',
            to_timestamp((x->>'at')::double precision / 1000), to_timestamp((x->>'at')::double precision / 1000)
     FROM jsonb_array_elements($1::jsonb) AS x
     ON CONFLICT (topic, stage, workspace_id, origin) DO UPDATE SET
       attempts = d.attempts + CASE WHEN d.source = EXCLUDED.source THEN 0 ELSE 1 END,
       status = CASE WHEN d.source = EXCLUDED.source THEN d.status ELSE 'dead' END,
       source = EXCLUDED.source, event_id = COALESCE(EXCLUDED.event_id, d.event_id), reason = EXCLUDED.reason,
       error = EXCLUDED.error, source_event = COALESCE(EXCLUDED.source_event, d.source_event), value = EXCLUDED.value,
       last_failed_at = CASE WHEN d.source = EXCLUDED.source THEN d.last_failed_at ELSE EXCLUDED.last_failed_at END`,
    [JSON.stringify(rows)],
  );
}
