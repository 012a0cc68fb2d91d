/**
 * Redrive: a dead letter goes back through its stage, under today's setup (docs/decisions.md, "Issue 10: dead
 * letters").
 *  - A stage's letter (events.dlq) is appended again, key and value as read, to the stage's own input, never an
 *    earlier one, so no redriven record is dropped by dedupe as a duplicate of itself. Embedded: in the transaction
 *    that marks it redriven; Kafka: acknowledged by the broker before that transaction commits.
 *  - A forwarder letter (conversions.dlq) is rebuilt under today's forwarding setup and filed into the outbox as the
 *    intake files a conversion (outbox-filing.ts): the sent ledger still decides, so nothing goes twice.
 * A letter that cannot go back (no setup, event no longer selected, disconnected, not encodable) stays a dead letter
 * with its attempts raised and the new error.
 */
import { conversionKey, type ConversionReady, type PlatformEventRecord } from '../domain/conversion.js';
import type { Db, Sql } from '../shared/db/db.js';
import type { DeadLetter } from '../domain/dead-letter.js';
import { readForwardingSetup } from '../domain/forwarding-setup.js';
import { Topics, type TopicName } from '../shared/topics.js';
import type { ProducedRecord } from '../stream/log.js';
import { fileIntoOutbox } from '../forwarder/outbox-filing.js';
import type { ConversionDeadLetter } from '../forwarder/outbox-repo.js';
import type { DeadLetterRepo, StoredDeadLetter } from './dead-letter-repo.js';

/** How a redrive appends a record to a stage's input: the runtime's log. */
export interface RedriveLog {
  /** Appends within `tx`, or makes the records durable before `tx` commits (throws when it cannot). */
  reappend(tx: Sql, topic: TopicName, records: readonly ProducedRecord[]): Promise<void>;
  /** After the transaction committed: wake the readers of the topic. */
  committed?(topic: TopicName): void;
}

export interface RedriveResult {
  readonly redriven: number;
  /** Letters that could not go back, with why (they stay dead letters, attempts raised). */
  readonly failed: Array<{ id: string; error: string }>;
}

/** A letter that cannot go back through its stage now: the reason it stays a dead letter (thrown by a RedriveLog too). */
export class CannotRedrive extends Error {}

/** Which letters a redrive takes: by id, or every waiting one of the workspace. */
export type RedriveSelection = { readonly ids: readonly string[] } | { readonly all: true };

/** Ids that are not dead letters of the workspace. */
export class UnknownDeadLetters extends Error {
  constructor(readonly ids: readonly string[]) {
    super(`no dead letter ${ids.slice(0, 5).join(', ')}`);
  }
}

/** Ids of letters that were already redriven. */
export class NotDeadLetters extends Error {
  constructor(readonly ids: readonly string[]) {
    super(`already redriven: ${ids.slice(0, 5).join(', ')}`);
  }
}

const REDRIVE_PAGE = 500;

const STAGE_INPUTS: ReadonlySet<string> = new Set<TopicName>([Topics.eventsRaw, Topics.eventsDeduped, Topics.conversionsReady]);

export class Redriver {
  constructor(
    private readonly deps: {
      readonly db: Db;
      readonly repo: DeadLetterRepo;
      readonly log: RedriveLog;
      /** The outbox has something new (wakes the sender). */
      readonly onQueued?: () => void;
      readonly now?: () => number;
    },
  ) {}

  /**
   * A redrive as a person asks for it (the admin API, the console): the letters by id, or all the workspace's waiting
   * ones page by page (letters that fail again stay dead and are not met twice); audited with the actor.
   * Throws UnknownDeadLetters / NotDeadLetters for ids that are not the workspace's waiting letters.
   */
  async redriveSelection(workspaceId: string, selection: RedriveSelection, actor: string): Promise<RedriveResult> {
    let redriven = 0;
    const failed: Array<{ id: string; error: string }> = [];
    if ('ids' in selection) {
      const letters = await this.deps.repo.byIds(workspaceId, selection.ids);
      const known = new Set(letters.map((l) => l.id));
      const missing = selection.ids.filter((id) => !known.has(id));
      if (missing.length > 0) throw new UnknownDeadLetters(missing);
      const notDead = letters.filter((l) => l.status !== 'dead');
      if (notDead.length > 0) throw new NotDeadLetters(notDead.map((l) => l.id));
      const r = await this.redrive(workspaceId, letters);
      redriven += r.redriven;
      failed.push(...r.failed);
    } else {
      for (let afterSeq = 0; ; ) {
        const page = await this.deps.repo.list(workspaceId, { status: 'dead', afterSeq, limit: REDRIVE_PAGE });
        if (page.length === 0) break;
        const r = await this.redrive(workspaceId, page);
        redriven += r.redriven;
        failed.push(...r.failed);
        afterSeq = page.at(-1)!.seq;
      }
    }
    await this.deps.repo.auditRedrive(workspaceId, { redriven, failed, all: !('ids' in selection) }, actor);
    return { redriven, failed };
  }

  /** Sends the letters back, one transaction each (one that fails does not hold back the others). */
  async redrive(workspaceId: string, letters: readonly StoredDeadLetter[]): Promise<RedriveResult> {
    let redriven = 0;
    const failed: RedriveResult['failed'] = [];
    let queued = false;
    for (const letter of letters) {
      try {
        const outcome = await this.deps.db.transaction(async (tx) => {
          // Locked and read again: a concurrent redrive or discard of the same letter wins once.
          const [current] = await this.deps.repo.byIds(workspaceId, [letter.id], tx, true);
          if (!current || current.status !== 'dead') return 'skipped' as const;
          return current.topic === Topics.conversionsDlq ? this.refile(tx, current) : this.reappend(tx, current);
        });
        if (outcome === 'skipped') continue;
        if (outcome.kind === 'reappended') this.deps.log.committed?.(outcome.topic);
        if (outcome.kind === 'refiled') queued = true;
        if (outcome.kind === 'failed') failed.push({ id: letter.id, error: outcome.error });
        else redriven++;
      } catch (err) {
        if (!(err instanceof CannotRedrive)) throw err;
        const error = (err as Error).message;
        await this.deps.db.transaction((tx) => this.deps.repo.failedAgain(tx, letter.id, error));
        failed.push({ id: letter.id, error });
      }
    }
    if (queued) this.deps.onQueued?.();
    return { redriven, failed };
  }

  private async reappend(tx: Sql, letter: StoredDeadLetter): Promise<{ kind: 'reappended'; topic: TopicName }> {
    const dl = letter.value as DeadLetter;
    if (!STAGE_INPUTS.has(dl.source_topic)) throw new CannotRedrive(`letter from ${dl.source_topic}: not a stage input`);
    const inner = dl.value as Record<string, unknown> | null;
    if (inner === null || inner === undefined) throw new CannotRedrive('the record had no value: nothing to send back');
    if (typeof inner === 'object' && 'undecodable_base64' in inner) {
      throw new CannotRedrive('the record could not be decoded when it was read: nothing readable to send back');
    }
    const topic = dl.source_topic as TopicName;
    await this.deps.log.reappend(tx, topic, [{ key: dl.key, value: inner }]);
    await this.deps.repo.markRedriven(tx, letter.id);
    return { kind: 'reappended', topic };
  }

  private async refile(tx: Sql, letter: StoredDeadLetter): Promise<{ kind: 'refiled' } | { kind: 'failed'; error: string }> {
    const dl = letter.value as ConversionDeadLetter;
    const now = (this.deps.now ?? Date.now)();
    const conversion = await rebuildConversion(tx, dl, letter.sourceEvent, Date.parse(letter.firstFailedAt));
    const { filed } = await fileIntoOutbox(tx, [{ key: conversionKey(conversion), value: conversion, position: `redrive of ${letter.id} at ${now}` }], now);
    const f = filed[0]!;
    if (f.kind === 'dead_lettered') return { kind: 'failed', error: f.letter.platform_message }; // its row was raised by the filing
    if (f.kind === 'dropped' && f.reason === 'disconnected') {
      throw new CannotRedrive('the workspace is disconnected from the platform: connect it, then redrive');
    }
    // Queued, or already sent / already waiting (delivered meanwhile): either way nothing is left to do here.
    await this.deps.repo.markRedriven(tx, letter.id);
    return { kind: 'refiled' };
  }
}

/** The conversion of a forwarder letter, rebuilt under the workspace's forwarding setup of today. */
export async function rebuildConversion(
  sql: Sql,
  dl: ConversionDeadLetter,
  sourceEvent: string | null,
  fallbackReceivedAt: number,
): Promise<ConversionReady> {
  // An unreadable conversion's letter holds the whole conversions.ready value; a rejected one holds the record.
  const whole = dl.reason === 'invalid_conversion' && isObject(dl.record) ? (dl.record as Partial<ConversionReady>) : undefined;
  const record = (whole ? whole.record : dl.record) as PlatformEventRecord | undefined;
  if (!isObject(record) || typeof record.event_id !== 'string' || record.event_id === '') {
    throw new CannotRedrive('the letter holds no platform record with an event_id: nothing to rebuild');
  }
  const workspaceId = dl.workspace_id;
  const setup = await readForwardingSetup(sql, workspaceId);
  const test = dl.test_event_code !== null;
  const common = {
    v: 1,
    workspace_id: workspaceId,
    key_mode: test ? 'test' : 'live',
    event_id: record.event_id,
    received_at: typeof whole?.received_at === 'number' ? whole.received_at : fallbackReceivedAt,
    request_id: typeof whole?.request_id === 'string' ? whole.request_id : null,
    ...(sourceEvent !== null ? { event_name: sourceEvent } : {}),
  } as const;
  // An event the forwarding setup does not take (or no setup) that another destination selects goes to those only,
  // as enrich builds it (steps/select-conversion.ts); each destination maps the event name to its own event.
  const mapping = sourceEvent !== null ? setup?.events.find((m) => m.name === sourceEvent) : undefined;
  const firstTakesIt = setup !== undefined && (sourceEvent === null || mapping !== undefined) && (!test || Boolean(setup.test_event_code));
  if (!firstTakesIt && sourceEvent !== null && (await selectedByOtherDestinations(sql, workspaceId, sourceEvent, test))) {
    return { ...common, event_source: '', event_source_id: '', test_event_code: null, record };
  }
  if (!setup) throw new CannotRedrive('the workspace has no forwarding setup: set it up, then redrive');
  if (sourceEvent !== null && !mapping) throw new CannotRedrive(`event "${sourceEvent}" is not selected in the forwarding setup any more`);
  if (test && !setup.test_event_code) throw new CannotRedrive('a test conversion, and the forwarding setup has no test_event_code');
  return {
    ...common,
    event_source: setup.event_source,
    event_source_id: setup.event_source_id,
    test_event_code: test ? setup.test_event_code : null,
    record: { ...record, event: mapping?.platform_event ?? record.event },
  };
}

/** Whether one of the workspace's other destinations selects the event (with a test code, for a test conversion). */
async function selectedByOtherDestinations(sql: Sql, workspaceId: string, eventName: string, test: boolean): Promise<boolean> {
  const r = await sql.query<{ setup: unknown }>('SELECT setup FROM destinations WHERE workspace_id = $1', [workspaceId]);
  return r.rows.some(({ setup }) => {
    const s = (typeof setup === 'string' ? JSON.parse(setup) : setup) as { events?: Array<{ name?: unknown }>; test_event_code?: unknown };
    return (s.events ?? []).some((e) => e.name === eventName) && (!test || (typeof s.test_event_code === 'string' && s.test_event_code !== ''));
  });
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
