/**
 * The embedded store's thread (started by shared/db/pglite.ts): one PGlite in DATA_DIR, answering the messages the
 * service's thread posts, one at a time. Node runs this file itself (from dist/, or as TypeScript when tests run from
 * source), so it imports with the `.ts` extension, which tsc rewrites (`rewriteRelativeImportExtensions`).
 */
import { PGlite, parse, protocol } from '@electric-sql/pglite';
import { parentPort, workerData } from 'node:worker_threads';
import { planResultChanged, StatementNames } from './prepared-statements.ts';

/** What the service's thread posts: a statement (with parameters, or a script with `exec`), or `close`. */
interface Message {
  readonly id: number;
  readonly text?: string;
  readonly params?: unknown[];
  readonly exec?: boolean;
  /** No transaction of the caller's is open: a statement whose plan went stale may run again at once. */
  readonly alone?: boolean;
  readonly close?: boolean;
}

interface Answer {
  readonly rows: unknown[];
  readonly affectedRows?: number;
}

const FIELDS = ['code', 'detail', 'hint', 'position', 'severity', 'schema', 'table', 'column', 'constraint', 'where', 'routine'];
/** A database error as plain data: errors cross to the service's thread by structured clone. */
function plain(e: unknown): Record<string, unknown> {
  const err = e as Record<string, unknown> | null | undefined;
  const o: Record<string, unknown> = { message: err?.message !== undefined ? err.message : String(e), name: err?.name };
  for (const k of FIELDS) if (err?.[k] !== undefined) o[k] = err[k];
  return o;
}

const port = parentPort!;
const pg = new PGlite((workerData as { dataDir?: string }).dataDir);
pg.waitReady.then(
  () => port.postMessage({ ready: true }),
  (e: unknown) => port.postMessage({ ready: false, error: plain(e) }),
);

// Statements with parameters run as named prepared statements, as on Postgres: PGlite's query() parses, describes,
// binds and executes in four calls into the engine, each statement planned anew; a named one is parsed once, then
// bound, described and executed in one call.
const serialize = protocol.serialize;
const names = new StatementNames();
/** The parameters' type oids of each statement prepared so far, by name. */
const prepared = new Map<string, readonly number[]>();

function joined(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

async function prepare(name: string, text: string): Promise<readonly number[]> {
  let ok = false;
  try {
    await pg.execProtocol(serialize.parse({ name, text }), { syncToFs: false });
    const { messages } = await pg.execProtocol(serialize.describe({ type: 'S', name }), { syncToFs: false });
    const description = messages.find((x) => x.name === 'parameterDescription') as { dataTypeIDs?: number[] } | undefined;
    ok = true;
    return description?.dataTypeIDs ?? [];
  } finally {
    await pg.execProtocol(serialize.sync(), { syncToFs: false });
    // A parse that succeeded before a failed describe leaves the name taken: close it (after the Sync, before which
    // the engine skips every message once one failed), so the next call prepares the same name again. Closing a
    // statement that does not exist is not an error.
    if (!ok) await pg.execProtocol(joined([serialize.close({ type: 'S', name }), serialize.sync()]), { syncToFs: false });
  }
}

async function query(text: string, params: unknown[] | undefined, alone: boolean): Promise<Answer> {
  if (!params || params.length === 0) return pg.query(text, params);
  const name = names.of(text);
  if (name === undefined) return pg.query(text, params);
  let types = prepared.get(name);
  if (types === undefined) {
    types = await prepare(name, text);
    prepared.set(name, types);
  }
  const values = params.map((v, i) => {
    if (v === null || v === undefined) return null;
    const write = pg.serializers[types[i]!];
    return write ? write(v) : String(v);
  });
  try {
    const bind = serialize.bind({ statement: name, values });
    const r = await pg.execProtocol(joined([bind, serialize.describe({ type: 'P' }), serialize.execute({}), serialize.sync()]));
    return parse.parseResults(r.messages, pg.parsers)[0]!;
  } catch (e) {
    // DDL that changed the result columns of a prepared statement's tables: the text runs unnamed from now on, and
    // at once when no transaction of the caller's is open (in one, the transaction fails and its caller retries).
    if (!planResultChanged(e)) throw e;
    names.forget(text);
    if (!alone) throw e;
    return pg.query(text, params);
  }
}

// One message at a time: a transaction's statements may be sent together (Promise.all), and a prepared statement's
// messages must not interleave with another's.
let turn: Promise<unknown> = Promise.resolve();
port.on('message', (m: Message) => {
  turn = turn.then(() => {
    if (m.close) return pg.close().then(() => port.postMessage({ id: m.id, rows: [] }), (e: unknown) => port.postMessage({ id: m.id, error: plain(e) }));
    const answer: Promise<Answer> = m.exec ? pg.exec(m.text!).then(() => ({ rows: [] })) : query(m.text!, m.params, m.alone === true);
    return answer.then(
      (r) => port.postMessage({ id: m.id, rows: r.rows, affectedRows: r.affectedRows }),
      (e: unknown) => port.postMessage({ id: m.id, error: plain(e) }),
    );
  });
});
