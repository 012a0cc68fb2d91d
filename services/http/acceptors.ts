/**
 * Extra acceptors on the service's listening socket, so that a burst of new connections is taken while the process
 * is busy.
 *
 * Why: libuv accepts one connection per event-loop iteration, so under load a burst of new connections waits in the
 * kernel's accept queue, out of reach of the deadline and of shedding (docs/decisions.md, "Late accepts"). Every
 * handle on the same listening socket accepts one more per iteration.
 *
 * How: a listening socket sent over an IPC channel arrives as a new descriptor of the same socket (SCM_RIGHTS), so a
 * helper process that sends the raw handle back `copies` times gives this process `copies` more descriptors; the
 * helper never listens and exits at once. Each copy hands its connections to the HTTP server as its own accepts do.
 */
import { spawn } from 'node:child_process';
import type { Server as HttpServer } from 'node:http';
import { Server as NetServer } from 'node:net';

/**
 * The helper: returns the raw handle it was given `copies` times, then leaves. NOTE: `on`, not `once`: a handle
 * waits for the receiver's acknowledgement before the next goes, and the channel holds the helper alive only while
 * it has a 'message' listener.
 */
const ECHO_SOURCE = `
process.on('message', (m, handle) => {
  for (let i = 0; i < m.copies; i++) process.send({ copy: i }, handle);
  process.send({ done: true }, () => process.disconnect());
});
`;

export interface Acceptors {
  /** How many extra acceptors listen. */
  readonly count: number;
  /** Stops the extra acceptors taking connections (at shutdown, with the server's own listener). */
  close(): void;
}

/**
 * Adds `copies` acceptors to a listening HTTP server. Rejects (having added none) when the helper fails; the server
 * keeps its own acceptor either way.
 */
export async function addAcceptors(server: HttpServer, copies: number, timeoutMs = 10_000): Promise<Acceptors> {
  const handle = (server as unknown as { _handle?: object | null })._handle;
  if (copies <= 0 || !handle) return { count: 0, close: () => undefined };
  const child = spawn(process.execPath, ['-e', ECHO_SOURCE], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const received: object[] = [];
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the acceptor helper did not answer within ${timeoutMs} ms`)), timeoutMs);
      child.on('message', (m: { done?: boolean }, copy?: object) => {
        if (copy) received.push(copy);
        if (m.done) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`the acceptor helper exited (code ${code}) before it was done`));
      });
      // The raw handle ('net.Native'), not the server: the helper must never listen on it itself.
      child.send({ copies }, handle as never);
    });
  } catch (err) {
    child.kill();
    for (const h of received) (h as { close?: () => void }).close?.();
    throw err;
  }
  const servers = received.map((copy) => {
    // The options Node's HTTP server gives its own net.Server, so that accepted sockets behave the same.
    const s = new NetServer({ allowHalfOpen: true, noDelay: true }, (socket) => server.emit('connection', socket));
    s.listen(copy as never);
    return s;
  });
  return {
    count: servers.length,
    // Stops listening at once; the connections they took belong to the HTTP server, which closes them.
    close: () => {
      for (const s of servers) s.close();
    },
  };
}
