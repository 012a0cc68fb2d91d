/**
 * The embedded runtime's log: topics as rows of log_records in the embedded store (or Postgres), read by offset.
 * Appends from concurrent requests are group-committed: while one transaction is in flight, new appends queue up
 * and go together in the next one, so durability costs one commit per group, not per request.
 */
import { EventEmitter } from 'node:events';
import type { Db, Sql } from '../../shared/db/db.js';
import { toNumber } from '../../shared/db/db.js';
import { jsonText, joinJsonTexts, splitJsonTexts } from '../../shared/db/json-texts.js';
import type { TopicName } from '../../shared/topics.js';
import { NotDurableError, type EventLogProducer, type ProducedRecord, takeGroup } from '../log.js';

interface PendingAppend {
  readonly topic: TopicName;
  readonly records: readonly ProducedRecord[];
  /** The records serialised for the append statement when they were handed over, outside the store's transaction. */
  readonly rows: AppendRows;
  readonly deadline: number;
  /** Set when a transaction started writing it: from then on it commits (or fails) with that transaction. */
  started: boolean;
  /** Set when its deadline passed before any transaction started it: the caller has been told no. */
  expired: boolean;
  timer?: NodeJS.Timeout;
  resolve(): void;
  reject(err: Error): void;
}

export interface StoredRecord<V = unknown> {
  readonly offset: number;
  readonly key: string;
  readonly value: V;
  readonly appendedAt: number;
}

/** Stable 32-bit lock id per topic, for pg_advisory_xact_lock. */
function topicLockId(topic: string): number {
  let h = 0x3e1;
  for (let i = 0; i < topic.length; i++) h = (Math.imul(h, 31) + topic.charCodeAt(i)) | 0;
  return h;
}

/**
 * A record to append. `sameAs`: its value is that of a record already in the log (a stage's input passed on
 * unchanged), which the store copies itself: the value is neither sent to it nor parsed again.
 */
export interface LogAppend extends ProducedRecord {
  readonly sameAs?: { readonly topic: TopicName; readonly offset: number };
}

/** A topic's records as the append statement takes them: keys, values serialised (jsonText), the copies' sources. */
interface AppendRows {
  readonly keys: string[];
  readonly values: string[];
  /** Per record, the topic and offset of the record it copies (sameAs), or null; undefined when none is a copy. */
  copies?: { readonly topics: Array<string | null>; readonly offsets: Array<number | null> };
}

/**
 * The statement of an append: the keys as a text[], the values as ONE text of JSON documents (shared/db/json-texts.ts:
 * each document's bytes read twice, not three times as in a JSON array of them), and for the copies of records already
 * in the log (`sameAs`) the source's topic and offset, whose value the store copies itself. ORDINALITY keeps the
 * offsets in the order of the records. The value column is json on PGlite and jsonb on Postgres (migration 0020):
 * json goes into both.
 */
const APPEND = `INSERT INTO log_records (topic, key, value)
  SELECT $1, r.k, CASE WHEN r.o IS NULL THEN r.v::json
                       ELSE (SELECT l.value::json FROM log_records l WHERE l.topic = r.t AND l."offset" = r.o) END
  FROM unnest($2::text[], ${splitJsonTexts('$3')}, $4::text[], $5::bigint[]) WITH ORDINALITY AS r(k, v, t, o, i)
  ORDER BY r.i`;

/** Records as the append statement takes them; a copy's value is not serialised (a placeholder stands for it). */
function appendRowsOf(records: readonly LogAppend[]): AppendRows {
  const rows: AppendRows = { keys: [], values: [] };
  records.forEach((r, i) => {
    rows.keys.push(r.key);
    rows.values.push(r.sameAs ? 'null' : jsonText(r.value));
    if (!r.sameAs) return;
    rows.copies ??= { topics: new Array<string | null>(records.length).fill(null), offsets: new Array<number | null>(records.length).fill(null) };
    rows.copies.topics[i] = r.sameAs.topic;
    rows.copies.offsets[i] = r.sameAs.offset;
  });
  return rows;
}

/** Several appends' rows of one topic as one (the group commit's), in order. */
function concatRows(all: readonly AppendRows[]): AppendRows {
  if (all.length === 1) return all[0]!;
  const rows: AppendRows = { keys: all.flatMap((r) => r.keys), values: all.flatMap((r) => r.values) };
  if (all.some((r) => r.copies)) {
    rows.copies = {
      topics: all.flatMap((r) => r.copies?.topics ?? r.keys.map(() => null)),
      offsets: all.flatMap((r) => r.copies?.offsets ?? r.keys.map(() => null)),
    };
  }
  return rows;
}

/**
 * Sends each topic's lock and insert without waiting for the statements before: the store runs them (on PGlite, on
 * its own thread) while the next topic's records are serialised here (each topic's `rows`, called in turn). Topics in
 * sorted order, so two transactions take the topics' locks in the same order and never deadlock.
 */
async function appendRows(tx: Sql, rowsByTopic: ReadonlyMap<TopicName, () => AppendRows>): Promise<void> {
  const sent: Promise<unknown>[] = [];
  try {
    for (const topic of [...rowsByTopic.keys()].sort()) {
      sent.push(tx.query('SELECT pg_advisory_xact_lock($1)', [topicLockId(topic)]));
      const rows = rowsByTopic.get(topic)!();
      sent.push(tx.query(APPEND, [topic, rows.keys, joinJsonTexts(rows.values), rows.copies?.topics ?? null, rows.copies?.offsets ?? null]));
    }
  } catch (err) {
    // A record that does not serialise: what was sent fails with the transaction; wait for it before saying so.
    await Promise.allSettled(sent);
    throw err;
  }
  await Promise.all(sent);
}

/**
 * Appends inside an existing transaction (used by stages: outputs commit with their state and offset). Takes the
 * topics' locks in a fixed order so two transactions never deadlock. A `sameAs` record must be readable in the same
 * transaction (a stage's input is: it was read there).
 */
export async function appendInTransaction(tx: Sql, batches: ReadonlyMap<TopicName, readonly LogAppend[]>): Promise<void> {
  const rows = new Map<TopicName, () => AppendRows>();
  for (const [topic, records] of batches) if (records.length > 0) rows.set(topic, () => appendRowsOf(records));
  await appendRows(tx, rows);
}

/** A commit's cost beside its records (BEGIN, locks, COMMIT), and the time left for the answer after it (ms). */
const COMMIT_FIXED_MS = 5;
const ANSWER_MARGIN_MS = 50;

export class EmbeddedLog implements EventLogProducer {
  /** Emits the topic name after each commit that appended to it (wakes in-process consumers): see announce. */
  readonly appended = new EventEmitter();
  /** Per topic, how many commits of this process appended to it (announce): a consumer's "anything since?". */
  private readonly announced = new Map<TopicName, number>();
  private queue: PendingAppend[] = [];
  private flushing = false;
  /** The measured cost of committing one record (learnPace); starts at a typical machine's. */
  private msPerRecord = 0.06;
  private closed = false;

  constructor(
    private readonly db: Db,
    private readonly opts: { maxGroupRecords?: number } = {},
  ) {
    this.appended.setMaxListeners(100);
  }

  append(topic: TopicName, records: readonly ProducedRecord[], deadline: number): Promise<void> {
    if (this.closed) return Promise.reject(new NotDurableError('log is closed'));
    if (records.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const pending: PendingAppend = { topic, records, rows: appendRowsOf(records), deadline, started: false, expired: false, resolve, reject };
      // Answer at the deadline even while the store is busy; the transaction that later reaches it skips it.
      pending.timer = setTimeout(() => {
        if (pending.started) return;
        pending.expired = true;
        reject(new NotDurableError('deadline passed before the log could take the events'));
      }, Math.max(0, deadline - Date.now()));
      this.queue.push(pending);
      if (!this.flushing) void this.flushLoop();
    });
  }

  private async flushLoop(): Promise<void> {
    this.flushing = true;
    try {
      while (this.queue.length > 0) {
        const group = this.takeGroup();
        try {
          // Deadlines are checked once the transaction holds the store: an append whose commit cannot end in time is
          // dropped unwritten (its request is answered 503); one that fits alone but not with the group waits.
          const { written, deferred, started, records } = await this.db.transaction(
            async (tx) => {
              const started = performance.now();
              const { live, deferred } = this.fitting(group, Date.now());
              for (const p of live) {
                p.started = true;
                clearTimeout(p.timer);
              }
              const byTopic = new Map<TopicName, AppendRows[]>();
              let records = 0;
              for (const p of live) {
                const list = byTopic.get(p.topic) ?? [];
                list.push(p.rows);
                byTopic.set(p.topic, list);
                records += p.records.length;
              }
              await appendRows(tx, new Map([...byTopic].map(([topic, groups]) => [topic, () => concatRows(groups)])));
              return { written: new Set(live), deferred, started, records };
            },
            { urgent: true },
          );
          this.learnPace(performance.now() - started, records);
          this.queue.unshift(...deferred);
          const kept = new Set(deferred);
          for (const p of group) {
            if (kept.has(p)) continue;
            clearTimeout(p.timer);
            if (written.has(p)) p.resolve();
            else if (!p.expired) p.reject(new NotDurableError('the log could not take the events within the deadline'));
          }
          for (const topic of new Set(group.filter((p) => written.has(p)).map((p) => p.topic))) this.announce(topic);
        } catch (err) {
          const e = new NotDurableError(`log write failed: ${(err as Error).message}`);
          for (const p of group) p.reject(e);
        }
      }
    } finally {
      this.flushing = false;
    }
  }

  /**
   * The appends of `group` whose commit, at the measured pace, ends inside every included append's deadline (less a
   * margin for the answer), in queue order; `deferred`: the ones that would fit alone but not after those. The rest
   * (expired, or too late even alone) are neither: they are refused.
   */
  private fitting(group: readonly PendingAppend[], now: number): { live: PendingAppend[]; deferred: PendingAppend[] } {
    const live: PendingAppend[] = [];
    const deferred: PendingAppend[] = [];
    let records = 0;
    let earliest = Infinity;
    const endsBy = (n: number): number => now + COMMIT_FIXED_MS + n * this.msPerRecord + ANSWER_MARGIN_MS;
    for (const p of group) {
      if (p.expired || p.deadline <= now) continue;
      if (endsBy(records + p.records.length) <= Math.min(earliest, p.deadline)) {
        live.push(p);
        records += p.records.length;
        earliest = Math.min(earliest, p.deadline);
      } else if (endsBy(p.records.length) <= p.deadline) deferred.push(p);
    }
    return { live, deferred };
  }

  /** Moves the commit pace (ms per record) towards a measured group's; small groups say little about it. */
  private learnPace(ms: number, records: number): void {
    if (records < 100) return;
    const measured = Math.max(0, ms - COMMIT_FIXED_MS) / records;
    this.msPerRecord = this.msPerRecord * 0.7 + measured * 0.3;
  }

  private takeGroup(): PendingAppend[] {
    return takeGroup(this.queue, this.opts.maxGroupRecords ?? 20_000);
  }

  /** Records of a topic after an offset, in order. */
  async read<V = unknown>(topic: TopicName, afterOffset: number, limit: number, sql: Sql = this.db): Promise<StoredRecord<V>[]> {
    // The value as text, parsed here: not on the embedded store's thread, and one string to pass from it, not a tree.
    const r = await sql.query<{ offset: unknown; key: string; value: string; appended_at: Date | string }>(
      'SELECT "offset", key, value::text AS value, appended_at FROM log_records WHERE topic = $1 AND "offset" > $2 ORDER BY "offset" LIMIT $3',
      [topic, afterOffset, limit],
    );
    return r.rows.map((row) => ({
      offset: toNumber(row.offset),
      key: row.key,
      value: JSON.parse(row.value) as V,
      appendedAt: new Date(row.appended_at).getTime(),
    }));
  }

  /** After a commit that appended to the topic (in this process): wakes its consumers. */
  announce(topic: TopicName): void {
    this.announced.set(topic, (this.announced.get(topic) ?? 0) + 1);
    this.appended.emit('append', topic);
  }

  /** How many commits of this process have appended to the topic: compare two readings to know if any did between. */
  announcedTo(topic: TopicName): number {
    return this.announced.get(topic) ?? 0;
  }

  /**
   * Waits until something is appended to the topic, or the timeout. With `since` (an `announcedTo` reading taken
   * before the caller last read the topic), it returns at once when an append was announced in between.
   */
  waitForAppend(topic: TopicName, timeoutMs: number, signal?: AbortSignal, since?: number): Promise<void> {
    if (since !== undefined && this.announcedTo(topic) !== since) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.appended.off('append', onAppend);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const onAppend = (t: string): void => {
        if (t === topic) done();
      };
      const timer = setTimeout(done, timeoutMs);
      this.appended.on('append', onAppend);
      signal?.addEventListener('abort', done);
    });
  }

  async healthy(): Promise<boolean> {
    if (this.closed) return false;
    try {
      await this.db.query('SELECT 1');
      return true;
    } catch {
      return false;
    }
  }

  /** Stops taking appends and waits for queued ones to finish. */
  async close(): Promise<void> {
    this.closed = true;
    while (this.flushing || this.queue.length > 0) await new Promise((r) => setTimeout(r, 5));
  }
}
