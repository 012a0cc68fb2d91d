import { createServer, type Server } from 'node:net';

/**
 * `n` distinct free TCP ports on loopback. All `n` listeners are held open until every one is bound, so one call
 * never hands out the same port twice (a broker given one port for both its listeners refuses to start). Closed
 * again before returning; another process may still take one in between (good enough for tests).
 */
export async function freePorts(n: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < n; i += 1) {
      const srv = createServer();
      servers.push(srv);
      ports.push(
        await new Promise<number>((resolve, reject) => {
          srv.once('error', reject);
          srv.listen(0, '127.0.0.1', () => {
            const addr = srv.address();
            resolve(typeof addr === 'object' && addr ? addr.port : 0);
          });
        }),
      );
    }
    return ports;
  } finally {
    await Promise.all(servers.map((srv) => new Promise<void>((resolve) => (srv.listening ? srv.close(() => resolve()) : resolve()))));
  }
}

/** A free TCP port on loopback (closed again before returning; good enough for tests). */
export async function freePort(): Promise<number> {
  const [port] = await freePorts(1);
  return port!;
}
