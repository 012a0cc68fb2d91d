/**
 * The one error policy of both runtimes, for a stage's batch that throws. Each attempt runs in a savepoint of the
 * batch's database transaction on a fork of its store transaction, so a failed attempt leaves nothing behind.
 * A throw is first probed for an outage (`SELECT 1`): if the database is the problem, OutageError, and the runtime
 * retries the whole batch later; nothing is dead-lettered during an outage. Otherwise the batch is bisected down to
 * single records, and one that fails MAX_ATTEMPTS times is dead-lettered (`processing_failed`); the rest of its batch
 * is processed exactly as without it.
 */
import type { Sql } from '../shared/db/db.js';
import { dlq, type BatchContext, type BatchWrite, type InputRecord, type Outcome, type OutputRecord, type Stage } from './contract.js';
import type { StoreTransaction } from './store.js';
import { ServiceError } from '../shared/errors.js';

export const MAX_ATTEMPTS = 3;

/** The batch must wait: its dependencies (the database) failed. Nothing of it was committed or dead-lettered. */
export class OutageError extends ServiceError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, { retryable: true, cause: options.cause });
  }
}

export interface PolicyScope<S> {
  /** The batch's database transaction. */
  readonly sql: Sql;
  /** The batch's store transaction (attempts work on forks of it). */
  readonly store: StoreTransaction<S>;
  readonly now: () => number;
  /** Receives the batch outputs (`ctx.emit`) of the attempts that succeeded, in order. */
  readonly emitted?: OutputRecord[];
  /** Told about each failed attempt before the policy decides what to do (logging). */
  readonly onFailure?: (err: unknown, size: number) => void;
}

/** Runs the stage over the records under the policy: one outcome per record, in order. Throws only OutageError. */
export async function processWithPolicy<V, S>(stage: Stage<V, S>, records: readonly InputRecord<V>[], scope: PolicyScope<S>): Promise<Outcome[]> {
  if (records.length === 0) return [];
  try {
    return await attempt(stage, records, scope);
  } catch (err) {
    if (err instanceof OutageError) throw err;
    scope.onFailure?.(err, records.length);
    await probe(scope.sql, err);
    if (records.length > 1) {
      const mid = Math.ceil(records.length / 2);
      const left = await processWithPolicy(stage, records.slice(0, mid), scope);
      const right = await processWithPolicy(stage, records.slice(mid), scope);
      return [...left, ...right];
    }
    let last: unknown = err;
    for (let n = 2; n <= MAX_ATTEMPTS; n++) {
      try {
        return await attempt(stage, records, scope);
      } catch (again) {
        if (again instanceof OutageError) throw again;
        last = again;
      }
    }
    await probe(scope.sql, last);
    return [dlq('processing_failed', last)];
  }
}

async function attempt<V, S>(stage: Stage<V, S>, records: readonly InputRecord<V>[], scope: PolicyScope<S>): Promise<Outcome[]> {
  const savepoint = new LazySavepoint(scope.sql);
  const fork = scope.store.fork();
  try {
    const { outcomes, emitted, writes } = await runBatch(stage, records, { sql: savepoint, store: fork, now: scope.now, inTransaction: true });
    for (const w of writes) await w(savepoint);
    await savepoint.release();
    scope.store.merge(fork);
    scope.emitted?.push(...emitted);
    return outcomes;
  } catch (err) {
    await savepoint.rollback(err);
    throw err;
  }
}

/** What one run of a stage's batch produced: its outcomes, its batch outputs (`ctx.emit`) and its writes (`ctx.write`). */
export interface BatchRun {
  readonly outcomes: Outcome[];
  readonly emitted: OutputRecord[];
  readonly writes: BatchWrite[];
}

/**
 * One attempt of an `ahead` stage's batch outside any transaction (contract.ts): `sql` is the database, the store's
 * writes stay in `store`. It throws whatever the stage throws: the runtime then processes the batch under the policy
 * inside its transaction, as any other stage's, so failures are bisected and dead-lettered in one place.
 */
export function processAhead<V, S>(stage: Stage<V, S>, records: readonly InputRecord<V>[], scope: PolicyScope<S>): Promise<BatchRun> {
  return runBatch(stage, records, { sql: scope.sql, store: scope.store, now: scope.now, inTransaction: false });
}

/** The stage's processBatch once, with the batch's context: one outcome per record, or it throws. */
async function runBatch<V, S>(
  stage: Stage<V, S>,
  records: readonly InputRecord<V>[],
  ctx: Omit<BatchContext<S>, 'write' | 'emit'>,
): Promise<BatchRun> {
  const emitted: OutputRecord[] = [];
  const writes: BatchWrite[] = [];
  const outcomes = await stage.processBatch(records, { ...ctx, write: (w) => void writes.push(w), emit: (o) => void emitted.push(o) });
  if (outcomes.length !== records.length) throw new Error(`stage ${stage.name} returned ${outcomes.length} outcomes for ${records.length} records`);
  return { outcomes, emitted, writes };
}

/**
 * The attempt's savepoint, set before the attempt's first statement: an attempt that runs no SQL (dedupe's) sends
 * none, so its batch's transaction never begins (postgres.ts).
 */
class LazySavepoint implements Sql {
  private set?: Promise<void>;

  constructor(private readonly sql: Sql) {}

  async query<R>(text: string, params?: readonly unknown[]) {
    this.set ??= this.sql.query('SAVEPOINT stage_attempt').then(
      () => undefined,
      (err: Error) => {
        throw new OutageError(`database: ${err.message}`, { cause: err });
      },
    );
    await this.set;
    return this.sql.query<R>(text, params);
  }

  async release(): Promise<void> {
    if (this.set) await this.sql.query('RELEASE SAVEPOINT stage_attempt');
  }

  /** Undoes the attempt's statements; the transaction itself gone (connection lost) is an outage. */
  async rollback(cause: unknown): Promise<void> {
    if (!this.set || (await this.set.then(() => false, () => true))) return;
    try {
      await this.sql.query('ROLLBACK TO SAVEPOINT stage_attempt');
    } catch (rollback) {
      throw new OutageError(`database: ${(rollback as Error).message}`, { cause });
    }
  }
}

async function probe(sql: Sql, cause: unknown): Promise<void> {
  try {
    await sql.query('SELECT 1');
  } catch (err) {
    throw new OutageError(`database: ${(err as Error).message}`, { cause });
  }
}
