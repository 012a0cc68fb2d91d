/**
 * Runs replay jobs (jobs.ts), one at a time per worker, on either runtime: the workspace's events received in
 * [from, to) are read again from events.deduped (stream/range.ts) through enrich in replay mode and the forwarder's
 * filing into the outbox, under today's setup (docs/replay.md). Each chunk is ONE transaction (the conversions it
 * files, the job's counts, its cursor), so a crash repeats at most that chunk, and the sent ledger and the outbox
 * keep anything from going twice (unless `resend`). Below live work: a rate bound, a fifth of the time in its
 * transactions at most, and a wait while the live stages have a backlog. A dry run rolls its savepoint back.
 */
import { randomUUID } from 'node:crypto';
import { createEnrichProcessor, type EnrichEntry } from '../enrich/processor.js';
import { forwardedConversions } from '../forwarder/metrics.js';
import { fileIntoOutbox, type Filed } from '../forwarder/outbox-filing.js';
import { conversionKey } from '../domain/conversion.js';
import type { Db, Sql } from '../shared/db/db.js';
import type { Logger } from '../shared/logger.js';
import { Topics } from '../shared/topics.js';
import type { BatchWrite, InputRecord, Stage } from '../stream/contract.js';
import { appendInTransaction } from '../stream/embedded/log.js';
import { rangeDone, type RangeChunk, type RangeReader } from '../stream/range.js';
import { NoStore } from '../stream/store.js';
import { ReplayRepo, type ChunkCounts, type ReplayJob } from './jobs.js';
import { replayConversions, replayEventsRead, replaysRunning } from './metrics.js';
import { sleep } from '../shared/sleep.js';
import { withRetries, type Backoff } from '../shared/retry.js';

export interface ReplayWorkerDeps {
  readonly db: Db;
  readonly reader: RangeReader;
  readonly logger: Logger;
  readonly maxEventsPerSecond: number;
  /** Records the live stages have not processed yet; the replay waits while it is above `maxLiveBacklog`. */
  readonly liveBacklog: () => Promise<number>;
  /** The sender has new conversions in its outbox. */
  readonly onQueued?: () => void;
  readonly maxLiveBacklog?: number;
  readonly chunkSize?: number;
  readonly leaseMs?: number;
  readonly pollMs?: number;
}

export const REPLAY_DEFAULTS = {
  maxLiveBacklog: 2_000,
  chunkSize: 100,
  leaseMs: 15_000,
  pollMs: 1_000,
  maxAttempts: 5,
  /**
   * The share of wall time a worker may spend in its chunks' transactions: after a chunk that took d ms it rests
   * d × (1 / share − 1) ms. Live work keeps the rest of the database (on the embedded store, one connection) and
   * of the core, whatever the pace allows.
   */
  maxBusyShare: 0.2,
} as const;

/** Between attempts at a job's range: 1 s, doubling to 30 s; stopping ends the wait. */
const REPLAY_BACKOFF: Backoff = { firstMs: 1_000, maxMs: 30_000, attempts: REPLAY_DEFAULTS.maxAttempts };

/** The job is not this worker's to run any more (cancelled, or its lease was taken over). */
class JobStopped extends Error {}

/** Whether an event of the log belongs to the job: its workspace, received in [from, to). */
function inJob(job: ReplayJob, value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as { workspace_id?: unknown; received_at?: unknown };
  return v.workspace_id === job.workspaceId && typeof v.received_at === 'number' && v.received_at >= job.from && v.received_at < job.to;
}

export class ReplayWorker {
  private readonly repo: ReplayRepo;
  private readonly owner = `replay-${randomUUID()}`;
  private readonly enrich: Stage<unknown, EnrichEntry> = createEnrichProcessor({ replay: true });
  private readonly stopping = new AbortController();
  private loop: Promise<void> | undefined;
  private readonly opts: Required<Pick<ReplayWorkerDeps, 'maxLiveBacklog' | 'chunkSize' | 'leaseMs' | 'pollMs'>>;
  /** Pacing: when the next chunk may start. */
  private nextAt = 0;

  constructor(private readonly deps: ReplayWorkerDeps) {
    this.repo = new ReplayRepo(deps.db);
    this.opts = {
      maxLiveBacklog: deps.maxLiveBacklog ?? REPLAY_DEFAULTS.maxLiveBacklog,
      // A chunk is at most a fifth of a second's budget: the pace stays smooth, and a crash loses little.
      chunkSize: deps.chunkSize ?? Math.max(1, Math.min(REPLAY_DEFAULTS.chunkSize, Math.floor(deps.maxEventsPerSecond / 5))),
      leaseMs: deps.leaseMs ?? REPLAY_DEFAULTS.leaseMs,
      pollMs: deps.pollMs ?? REPLAY_DEFAULTS.pollMs,
    };
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops after the chunk in flight and gives the job back, so a restart resumes it at once. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.loop;
  }

  private async run(): Promise<void> {
    const signal = this.stopping.signal;
    while (!signal.aborted) {
      let job: ReplayJob | null = null;
      try {
        job = await this.repo.claim(this.owner, this.opts.leaseMs);
      } catch (err) {
        this.deps.logger.warn({ err }, 'replay: could not look for jobs; will retry');
      }
      if (!job) {
        await sleep(this.opts.pollMs, signal);
        continue;
      }
      replaysRunning.inc();
      try {
        await this.runJob(job);
      } finally {
        replaysRunning.dec();
      }
    }
  }

  private async runJob(claimed: ReplayJob): Promise<void> {
    const log = this.deps.logger.child({ replay: claimed.id, workspace: claimed.workspaceId });
    const jobStop = new AbortController();
    const stopJob = (): void => jobStop.abort();
    this.stopping.signal.addEventListener('abort', stopJob, { once: true });
    // The lease is renewed on a timer too: a chunk waiting for live work or the pace must not lose it.
    const renewal = setInterval(() => {
      this.repo
        .renew(claimed.id, this.owner, this.opts.leaseMs)
        .then((mine) => !mine && jobStop.abort())
        .catch((err: unknown) => log.warn({ err }, 'replay: lease renewal failed'));
    }, Math.max(50, Math.floor(this.opts.leaseMs / 3)));
    try {
      let job = claimed;
      if (!job.start || !job.end || !job.cursor) {
        const { start, end } = await this.deps.reader.bounds(Topics.eventsDeduped, job.from, job.to);
        await this.repo.setBounds(job.id, this.owner, start, end);
        job = { ...job, start, end, cursor: start };
      }
      log.info({ from: new Date(job.from).toISOString(), to: new Date(job.to).toISOString(), dry_run: job.dryRun, resend: job.resend }, 'replay running');
      let attempts = 0;
      let done: ReplayJob;
      try {
        // Each attempt reads on from the saved cursor to the end of the range.
        done = await withRetries(
          async () => {
            const cursor = (await this.repo.get(job.workspaceId, job.id))?.cursor ?? job.cursor!;
            await this.deps.reader.read(Topics.eventsDeduped, cursor, job.end!, (chunk) => this.chunk(job, chunk, jobStop.signal), {
              signal: jobStop.signal,
              chunkSize: this.opts.chunkSize,
              workspaceId: job.workspaceId,
            });
            const now = await this.repo.get(job.workspaceId, job.id);
            // The read ended short of the end (should not happen): a failed attempt too, resumed from the cursor.
            if (!now || !now.cursor || !rangeDone(job.end!, now.cursor)) throw new Error('the log ended before the range did');
            return now;
          },
          REPLAY_BACKOFF,
          {
            signal: jobStop.signal,
            retryable: (err) => !(err instanceof JobStopped),
            onFailure: (_err, attempt) => (attempts = attempt),
            onRetry: (err, attempt) => log.warn({ err, attempts: attempt }, 'replay chunk failed; resuming from the saved cursor'),
          },
        );
      } catch (err) {
        if (err instanceof JobStopped || jobStop.signal.aborted) return;
        log.error({ err, attempts }, 'replay failed');
        await this.repo.finish(job.id, this.owner, 'failed', (err as Error).message.slice(0, 1000));
        return;
      }
      await this.repo.finish(job.id, this.owner, 'done');
      log.info(
        { events_read: done.eventsRead, conversions_queued: done.conversionsSent, conversions_parked: done.conversionsParked, skipped_already_sent: done.skippedAlreadySent },
        'replay done',
      );
    } catch (err) {
      log.warn({ err }, 'replay stopped by an error; another attempt resumes it');
    } finally {
      clearInterval(renewal);
      this.stopping.signal.removeEventListener('abort', stopJob);
      // Stopping (or a failure outside the chunks): hand the job back; after a cancel this changes nothing.
      await this.repo.release(claimed.id, this.owner).catch(() => undefined);
    }
  }

  /** One chunk: waits for its turn, then files what it builds, in one transaction with the job's counts and cursor. */
  private async chunk(job: ReplayJob, chunk: RangeChunk, signal: AbortSignal): Promise<void> {
    const events = chunk.records.filter((r) => inJob(job, r.value));
    if (events.length > 0) await this.waitForTurn(events.length, signal);
    if (signal.aborted) throw new JobStopped('stopping');
    let queued = false;
    const began = Date.now();
    await this.deps.db.transaction(async (tx) => {
      const current = await this.repo.lockForChunk(tx, job.id, this.owner);
      if (!current) throw new JobStopped('the job was cancelled or taken over');
      const counts = events.length > 0 ? await this.replayEvents(tx, current, events) : EMPTY;
      queued = counts.conversionsSent > 0 && !current.dryRun;
      await this.repo.advance(tx, job.id, chunk.partition, chunk.next, counts, this.opts.leaseMs);
    });
    replayEventsRead.inc(events.length);
    if (queued) this.deps.onQueued?.();
    const took = Date.now() - began;
    this.nextAt = Math.max(this.nextAt, Date.now() + took * (1 / REPLAY_DEFAULTS.maxBusyShare - 1));
  }

  /** The pace (events per second) and live work first: waits while the live stages are behind. */
  private async waitForTurn(events: number, signal: AbortSignal): Promise<void> {
    for (;;) {
      const wait = this.nextAt - Date.now();
      if (wait > 0) await sleep(wait, signal);
      if (signal.aborted) return;
      const backlog = await this.deps.liveBacklog().catch(() => 0);
      if (backlog <= this.opts.maxLiveBacklog) break;
      await sleep(250, signal);
    }
    this.nextAt = Math.max(this.nextAt, Date.now()) + (events * 1000) / this.deps.maxEventsPerSecond;
  }

  private async replayEvents(tx: Sql, job: ReplayJob, events: ReadonlyArray<InputRecord<unknown>>): Promise<ChunkCounts> {
    const dropped = new Map<string, number>();
    const count = (reason: string): void => void dropped.set(reason, (dropped.get(reason) ?? 0) + 1);
    if (job.dryRun) await tx.query('SAVEPOINT replay_dry_run');
    // A replay reads the graph from its queryable tables and changes nothing: no store, nothing to emit.
    const writes: BatchWrite[] = [];
    const outcomes = await this.enrich.processBatch(events, {
      sql: tx,
      store: new NoStore(),
      now: Date.now,
      inTransaction: true,
      write: (w) => void writes.push(w),
      emit: () => {
        throw new Error('a replay emits nothing');
      },
    });
    for (const w of writes) await w(tx);
    const conversions = outcomes.flatMap((o) => {
      if (o.type !== 'ok') count(o.reason);
      return o.type === 'ok' ? o.outputs : [];
    });
    const { filed, counted } = await fileIntoOutbox(
      tx,
      conversions.map((c) => ({ key: c.key, value: c.value, position: `replay ${job.id}` })),
      Date.now(),
      job.resend ? { resendSentBefore: job.createdAt } : {},
    );
    let sent = 0;
    let skipped = 0;
    let alreadyQueued = 0;
    const letters: Array<Extract<Filed, { kind: 'dead_lettered' }>['letter']> = [];
    for (const f of filed) {
      if (f.kind === 'queued') sent += 1;
      else if (f.kind === 'dropped' && f.reason === 'already_sent') skipped += 1;
      else if (f.kind === 'dropped' && f.reason === 'already_queued') alreadyQueued += 1;
      else if (f.kind === 'dropped') count(f.reason);
      else {
        count(f.letter.reason);
        letters.push(f.letter);
      }
    }
    if (job.dryRun) await tx.query('ROLLBACK TO SAVEPOINT replay_dry_run');
    else {
      if (letters.length > 0) {
        await appendInTransaction(tx, new Map([[Topics.conversionsDlq, letters.map((l) => ({ key: conversionKey(l), value: l }))]]));
      }
      for (const c of counted) forwardedConversions.inc({ outcome: c.outcome, code: c.code });
    }
    // Every parked conversion was queued too: the filing counts it once more, as parked, with its connection's status.
    const parked = counted.filter((c) => c.outcome === 'parked').length;
    replayConversions.inc({ outcome: 'built' }, conversions.length);
    replayConversions.inc({ outcome: 'sent' }, job.dryRun ? 0 : sent - parked);
    replayConversions.inc({ outcome: 'parked' }, job.dryRun ? 0 : parked);
    replayConversions.inc({ outcome: 'skipped_already_sent' }, skipped);
    replayConversions.inc({ outcome: 'skipped_already_queued' }, alreadyQueued);
    return {
      eventsRead: events.length,
      conversionsBuilt: conversions.length,
      conversionsSent: sent - parked,
      conversionsParked: parked,
      skippedAlreadySent: skipped,
      skippedAlreadyQueued: alreadyQueued,
      dropped,
    };
  }
}

const EMPTY: ChunkCounts = {
  eventsRead: 0,
  conversionsBuilt: 0,
  conversionsSent: 0,
  conversionsParked: 0,
  skippedAlreadySent: 0,
  skippedAlreadyQueued: 0,
  dropped: new Map(),
};
