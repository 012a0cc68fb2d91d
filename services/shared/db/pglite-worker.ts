/**
 * The embedded store's thread (started by shared/db/pglite.ts): one PGlite in DATA_DIR, answering the messages the
 * service's thread posts, one at a time. Node runs this file itself (from dist/, or as TypeScript when tests run from
 * source), so it imports with the `.ts` extension, which tsc rewrites (`rewriteRelativeImportExtensions`).
 */
import { PGlite } from '@electric-sql/pglite';
import { parentPort, workerData } from 'node:worker_threads';
import { serialize as wire } from 'pg-protocol';
import type { BackendMessage, CommandCompleteMessage, DataRowMessage, RowDescriptionMessage } from 'pg-protocol/dist/messages.js';
import { Parser } from 'pg-protocol/dist/parser.js';
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
const names = new StatementNames();
/** The parameters' type oids of each statement prepared so far, by name. */
const prepared = new Map<string, readonly number[]>();

async function prepare(name: string, text: string): Promise<readonly number[]> {
  let ok = false;
  try {
    await pg.execProtocol(wire.parse({ name, text }), { syncToFs: false });
    const { messages } = await pg.execProtocol(wire.describe({ type: 'S', name }), { syncToFs: false });
    const description = messages.find((x) => x.name === 'parameterDescription') as { dataTypeIDs?: number[] } | undefined;
    ok = true;
    return description?.dataTypeIDs ?? [];
  } finally {
    await pg.execProtocol(wire.sync(), { syncToFs: false });
    // A parse that succeeded before a failed describe leaves the name taken: close it (after the Sync, before which
    // the engine skips every message once one failed), so the next call prepares the same name again. Closing a
    // statement that does not exist is not an error.
    if (!ok) await pg.execProtocol(Buffer.concat([wire.close({ type: 'S', name }), wire.sync()]), { syncToFs: false });
  }
}

/** Describe the portal, execute it, Sync: what follows every Bind. */
const RUN = Buffer.concat([wire.describe({ type: 'P' }), wire.execute({}), wire.sync()]);
/** Command tags that end in the number of rows they changed ("INSERT 0 5", "UPDATE 3"), as PGlite counts them. */
const COUNTED = new Set(['INSERT', 'UPDATE', 'DELETE', 'COPY', 'MERGE']);

/**
 * Runs protocol messages through node-postgres' codec (pg-protocol) rather than PGlite's: PGlite's measures each
 * string parameter's UTF-8 length in a JavaScript loop and copies it four times on the way in, and copies its answer
 * three times (a chunk, the receive buffer, each field) on the way out; on its thread that was ~20% of the busy time,
 * with ~11% more in garbage collection. Rows are the objects PGlite's `query` gives: one per row, each field parsed by
 * PGlite's parser for its type; affected rows counted as PGlite counts them.
 */
async function run(message: Uint8Array): Promise<Answer> {
  const parser = new Parser();
  let fields: RowDescriptionMessage['fields'] = [];
  const rows: Record<string, unknown>[] = [];
  let affectedRows = 0;
  let error: unknown;
  const onMessage = (m: BackendMessage): void => {
    if (error !== undefined) return;
    switch (m.name) {
      case 'rowDescription':
        fields = (m as RowDescriptionMessage).fields;
        break;
      case 'dataRow': {
        const values = (m as DataRowMessage).fields as Array<string | null>;
        const row: Record<string, unknown> = {};
        for (let i = 0; i < values.length; i++) {
          const { name, dataTypeID } = fields[i]!;
          const v = values[i]!;
          const parseValue = pg.parsers[dataTypeID];
          row[name] = v === null ? null : parseValue ? parseValue(v, dataTypeID) : v;
        }
        rows.push(row);
        break;
      }
      case 'commandComplete': {
        const parts = (m as CommandCompleteMessage).text.split(' ');
        if (COUNTED.has(parts[0]!)) affectedRows += parseInt(parts.at(-1)!, 10);
        break;
      }
      case 'error':
        error = m;
        break;
    }
  };
  await pg.execProtocolRawStream(message, {
    // A chunk is a view of the engine's memory, reused after the call: the parser keeps a partial message, so copy.
    onRawData: (chunk) => parser.parse(Buffer.from(chunk), onMessage),
  });
  if (error !== undefined) throw error;
  return { rows, affectedRows };
}

async function query(text: string, params: unknown[] | undefined, alone: boolean): Promise<Answer> {
  // Without parameters (BEGIN, SAVEPOINT, COMMIT…): the simple protocol, one call into the engine where PGlite's
  // query() makes six.
  if (!params || params.length === 0) return run(wire.query(text));
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
    return write ? (write(v) as string) : String(v);
  });
  try {
    return await run(Buffer.concat([wire.bind({ statement: name, values }), RUN]));
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
    // `busy`: this thread's busy time so far (ms), its event loop's active time (embedded_store_busy_seconds_total).
    return answer.then(
      (r) => port.postMessage({ id: m.id, rows: r.rows, affectedRows: r.affectedRows, busy: performance.eventLoopUtilization().active }),
      (e: unknown) => port.postMessage({ id: m.id, error: plain(e), busy: performance.eventLoopUtilization().active }),
    );
  });
});
