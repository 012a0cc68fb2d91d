/**
 * The embedded store: PGlite (Postgres compiled to WASM) in DATA_DIR, run on a worker thread of its own.
 *
 * Why a thread: PGlite executes each statement synchronously and resolves it inside the microtask queue, so on the
 * service's own thread a backlog of statements keeps the event loop from reading sockets, past the deadline and out
 * of reach of shedding (docs/decisions.md, "PGlite on a worker thread").
 *
 * The thread holds the one PGlite connection; this side serialises use of it: a transaction holds it from BEGIN to
 * COMMIT or ROLLBACK, and a query outside a transaction waits for it (as PGlite's own transaction() does).
 */
import { mkdirSync } from 'node:fs';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { embeddedStoreBusy, embeddedStoreStatements } from '../metrics.js';
import { inTransaction, type Db, type QueryResult, type Tx } from './db.js';

interface Reply {
  readonly id?: number;
  readonly ready?: boolean;
  readonly rows?: unknown[];
  readonly affectedRows?: number;
  /** The thread's busy time so far, ms (pglite-worker.ts). */
  readonly busy?: number;
  readonly error?: { message: string; name?: string } & Record<string, unknown>;
}

/** A database error as the thread reported it: PGlite's message and fields (code, detail, …) on a plain Error. */
function errorOf(e: NonNullable<Reply['error']>): Error {
  const err = new Error(e.message) as Error & Record<string, unknown>;
  for (const [k, v] of Object.entries(e)) if (k !== 'message' && k !== 'name') err[k] = v;
  return err;
}

/**
 * Runs tasks one at a time. Urgent tasks (a request waits for them) go before waiting normal ones (background work),
 * except that a normal task that has waited `fairnessMs` goes next, so the stages still move while ingestion is
 * overloaded.
 */
export class FairTaskQueue {
  private busy = false;
  private readonly urgent: Array<() => void> = [];
  private readonly normal: Array<{ readonly since: number; readonly go: () => void }> = [];

  constructor(
    private readonly fairnessMs = 500,
    private readonly now: () => number = () => performance.now(),
  ) {}

  run<T>(task: () => Promise<T>, urgent = false): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const go = (): void => {
        Promise.resolve()
          .then(task)
          .then(resolve, reject)
          .finally(() => this.next());
      };
      if (!this.busy) {
        this.busy = true;
        go();
      } else if (urgent) this.urgent.push(go);
      else this.normal.push({ since: this.now(), go });
    });
  }

  private next(): void {
    const overdue = this.normal.length > 0 && this.now() - this.normal[0]!.since >= this.fairnessMs;
    const go = overdue || this.urgent.length === 0 ? this.normal.shift()?.go : this.urgent.shift();
    if (go) go();
    else this.busy = false;
  }
}

/** Opens the embedded store. dataDir undefined = in memory (tests). */
export async function openPglite(dataDir: string | undefined): Promise<Db> {
  if (dataDir) mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  // The thread's module beside this one: .js in dist/, .ts when tests run from source (Node strips its types).
  const worker = new Worker(new URL(`./pglite-worker${extname(fileURLToPath(import.meta.url))}`, import.meta.url), { workerData: { dataDir } });
  const pending = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void }>();
  let nextId = 0;
  /** The thread's busy time (ms) as its last answer said, counted into embedded_store_busy_seconds_total. */
  let busy = 0;
  let gone: Error | undefined;
  const fail = (err: Error): void => {
    gone ??= err;
    for (const p of pending.values()) p.reject(gone);
    pending.clear();
  };
  const ready = new Promise<void>((resolve, reject) => {
    worker.on('message', (m: Reply) => {
      if (m.ready !== undefined) {
        if (m.ready) resolve();
        else reject(errorOf(m.error!));
        return;
      }
      if (m.busy !== undefined && m.busy > busy) {
        embeddedStoreBusy.inc((m.busy - busy) / 1000);
        busy = m.busy;
      }
      const p = pending.get(m.id!);
      if (!p) return;
      pending.delete(m.id!);
      if (pending.size === 0) worker.unref();
      if (m.error) p.reject(errorOf(m.error));
      else p.resolve(m);
    });
    worker.on('error', (err) => {
      fail(err);
      reject(err);
    });
    worker.on('exit', (code) => {
      const err = new Error(`the embedded store's thread exited (code ${code})`);
      fail(err);
      reject(err);
    });
  });
  await ready;
  worker.unref();

  const send = (message: Record<string, unknown>): Promise<Reply> => {
    if (gone) return Promise.reject(gone);
    const id = nextId++;
    return new Promise<Reply>((resolve, reject) => {
      // The thread keeps the process alive only while a statement is on its way (a program that ends without
      // closing the store still ends; one awaiting a statement still gets its answer).
      if (pending.size === 0) worker.ref();
      pending.set(id, { resolve, reject });
      worker.postMessage({ ...message, id });
      if (message.close === undefined) embeddedStoreStatements.inc();
    });
  };
  /** `alone`: no transaction of the caller's is open (the thread may retry a statement at once). */
  const run = async <R>(text: string, params: readonly unknown[] | undefined, alone: boolean): Promise<QueryResult<R>> => {
    const r = await send({ text, params, alone });
    return { rows: r.rows as R[], affectedRows: r.affectedRows };
  };
  const raw: Tx = {
    query: (text, params) => run(text, params, false),
    // PGlite's query() takes one statement; exec() a script of several.
    async exec(script: string): Promise<void> {
      await send({ text: script, exec: true });
    },
  };
  const turns = new FairTaskQueue();
  return {
    kind: 'pglite',
    query: (text, params) => turns.run(() => run(text, params, true)),
    transaction: (fn, opts) => turns.run(() => inTransaction(raw, fn), opts?.urgent === true),
    close: async () => {
      await turns.run(() => send({ close: true })).catch(() => undefined);
      await worker.terminate();
    },
  };
}
