/**
 * The spec's 1.5 s request deadline, measured from the moment the request's headers arrived. A body still
 * streaming at the deadline is cut off (408, nothing accepted); a handler uses the same deadline for the log
 * append, past which it answers 503 and the log drops the events unwritten.
 */
import { PassThrough } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { IngestError } from './problems.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Epoch ms by which this request must be answered. */
    deadline: number;
  }
}

export function registerDeadline(app: FastifyInstance, budgetMs: number): void {
  app.decorateRequest('deadline', 0);
  app.addHook('onRequest', async (request) => {
    request.deadline = Date.now() + budgetMs;
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
    guarded.on('close', () => clearTimeout(timer));
    payload.pipe(guarded);
    return guarded;
  });
}
