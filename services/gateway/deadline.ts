/**
 * The spec's 1.5 s request deadline, measured from the request's first byte (not from `onRequest`,
 * which under load runs long after the bytes arrived). The first byte is when Node's HTTP parser began the
 * message (llhttp's on-message-begin, per request, also on keep-alive sockets); where that hook is unavailable,
 * `onRequest` is the fallback.
 * At the deadline, one timer decides what the client gets:
 * - the body has not fully arrived: 408 (a slow body), the connection closes after the answer;
 * - otherwise (a slow key lookup, a busy store): 503 with Retry-After, unless the events are already being
 *   appended: then the log decides (it drops an append whose deadline passed before its commit started).
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { NotDurableError } from '../stream/log.js';
import { IngestError } from './problems.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Epoch ms by which this request must be answered. */
    deadline: number;
    /**
     * Set while the events are being appended: from then on the log decides (it drops an append whose deadline
     * passed before its commit started), so the deadline timer must not answer 503 for events it may still commit.
     */
    appending: boolean;
  }
}

const FIRST_BYTE = Symbol('firstByteAt');
const ORIGINAL = Symbol('originalOnMessageBegin');
type TimedSocket = Socket & { [FIRST_BYTE]?: number; parser?: Record<PropertyKey, unknown> & { constructor: { kOnMessageBegin?: number } } };

/** Records, per socket, the epoch ms at which the parser began the current request. */
function trackFirstByte(app: FastifyInstance): void {
  const server = app.server;
  if ((server as unknown as Record<symbol, boolean>)[FIRST_BYTE]) return;
  (server as unknown as Record<symbol, boolean>)[FIRST_BYTE] = true;
  server.on('connection', (socket: TimedSocket) => {
    const parser = socket.parser;
    const slot = parser?.constructor.kOnMessageBegin;
    if (parser === undefined || typeof slot !== 'number') return;
    // NOTE: Node reuses parsers across connections: unwrap our own hook of a previous connection, never stack them.
    const current = parser[slot] as (((...a: unknown[]) => unknown) & { [ORIGINAL]?: unknown }) | null | undefined;
    const original = typeof current === 'function' && ORIGINAL in current ? current[ORIGINAL] : current;
    const hook = function onMessageBegin(this: unknown, ...args: unknown[]) {
      socket[FIRST_BYTE] = Date.now();
      return typeof original === 'function' ? (original as (...a: unknown[]) => unknown).apply(this, args) : undefined;
    };
    parser[slot] = Object.assign(hook, { [ORIGINAL]: original });
  });
}

/** When the request's first byte arrived (epoch ms), or `fallback`. */
export function firstByteAt(raw: IncomingMessage, fallback: number): number {
  const at = (raw.socket as TimedSocket | null)?.[FIRST_BYTE];
  return at !== undefined && at <= fallback && fallback - at < 60_000 ? at : fallback;
}

export function registerDeadline(app: FastifyInstance, budgetMs: number): void {
  trackFirstByte(app);
  app.decorateRequest('deadline', 0);
  app.decorateRequest('appending', false);
  const timers = new WeakMap<object, NodeJS.Timeout>();
  const bodies = new WeakMap<object, PassThrough>();

  app.addHook('onRequest', async (request, reply) => {
    const now = Date.now();
    request.deadline = firstByteAt(request.raw, now) + budgetMs;
    if (now >= request.deadline) {
      // The request line and headers alone took the whole budget.
      throw new IngestError('timeout', `the request did not arrive within ${budgetMs} ms of its first byte`, { Connection: 'close' });
    }
    const timer = setTimeout(() => {
      if (reply.sent || request.appending) return;
      if (!request.raw.complete) {
        const slow = new IngestError('timeout', `the request body did not arrive within ${budgetMs} ms of its first byte`, { Connection: 'close' });
        const body = bodies.get(request);
        // While the parser waits for the body, failing its stream lets it answer; before that, answer here.
        if (body && !body.destroyed) {
          request.raw.unpipe(body);
          body.destroy(slow);
        } else reply.send(slow);
        return;
      }
      reply.send(new NotDurableError(`the request could not be completed within ${budgetMs} ms`));
    }, Math.max(0, request.deadline - Date.now()));
    timers.set(request, timer);
  });
  app.addHook('onResponse', async (request) => {
    clearTimeout(timers.get(request));
  });
  app.addHook('onRequestAbort', async (request) => {
    clearTimeout(timers.get(request));
  });
  app.addHook('preParsing', async (request, _reply, payload) => {
    const guarded = new PassThrough() as PassThrough & { receivedEncodedLength?: number };
    guarded.receivedEncodedLength = 0;
    payload.on('data', (chunk: Buffer) => {
      guarded.receivedEncodedLength! += chunk.length;
    });
    payload.on('error', (err) => guarded.destroy(err));
    // Errors after the answer went out (e.g. a 413 decided from Content-Length) have nobody to report to.
    guarded.on('error', () => undefined);
    bodies.set(request, guarded);
    payload.pipe(guarded);
    return guarded;
  });
}
