/**
 * The spec's 1.5 s request deadline, measured from the moment the request's headers arrived. A body still
 * streaming at the deadline is cut off (408, nothing accepted); a handler uses the same deadline for the log
 * append, past which it answers 503 and the log drops the events unwritten.
 */
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

export function registerDeadline(app: FastifyInstance, budgetMs: number): void {
  app.decorateRequest('deadline', 0);
  app.decorateRequest('appending', false);
  const timers = new WeakMap<object, NodeJS.Timeout>();
  const bodyTimers = new WeakMap<object, NodeJS.Timeout>();
  app.addHook('onRequest', async (request, reply) => {
    request.deadline = Date.now() + budgetMs;
    // Whatever holds a request up (a slow key lookup, a busy store), it is answered within the deadline.
    const timer = setTimeout(() => {
      if (!reply.sent && !request.appending) {
        reply.send(new NotDurableError(`the request could not be completed within ${budgetMs} ms`));
      }
    }, budgetMs);
    timers.set(request, timer);
  });
  app.addHook('onResponse', async (request) => {
    clearTimeout(timers.get(request));
    clearTimeout(bodyTimers.get(request));
  });
  app.addHook('preParsing', async (request, _reply, payload) => {
    const remaining = request.deadline - Date.now();
    const guarded = new PassThrough() as PassThrough & { receivedEncodedLength?: number };
    guarded.receivedEncodedLength = 0;
    const timer = setTimeout(() => {
      // The socket stays open for the answer; `Connection: close` ends it once the 408 is written.
      payload.unpipe(guarded);
      guarded.destroy(
        new IngestError('timeout', `the request body did not arrive within ${budgetMs} ms`, { Connection: 'close' }),
      );
    }, Math.max(0, remaining));
    payload.on('data', (chunk: Buffer) => {
      guarded.receivedEncodedLength! += chunk.length;
    });
    payload.on('end', () => clearTimeout(timer));
    payload.on('error', (err) => {
      clearTimeout(timer);
      guarded.destroy(err);
    });
    // Errors after the answer went out (e.g. a 413 decided from Content-Length) have nobody to report to.
    guarded.on('error', () => undefined);
    bodyTimers.set(request, timer);
    guarded.on('end', () => clearTimeout(timer));
    guarded.on('close', () => clearTimeout(timer));
    payload.pipe(guarded);
    return guarded;
  });
}
