/**
 * Extra acceptors: connections a copy of the listening socket accepts are served by the HTTP server like
 * its own, and a burst of connections that arrives while the event loop is blocked is taken in a few iterations.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { addAcceptors, type Acceptors } from './acceptors.js';

let server: Server | undefined;
let acceptors: Acceptors | undefined;
afterEach(async () => {
  acceptors?.close();
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
});

/** 40 connections; the flag file once all are connected; then one request on each; prints how many were served. */
const BURST = `
const net = require('node:net'), fs = require('node:fs');
const [port, flag] = process.argv.slice(1);
const sockets = Array.from({ length: 40 }, () => net.connect(Number(port), '127.0.0.1'));
let connected = 0, served = 0, done = 0;
for (const s of sockets) {
  let raw = '';
  s.on('connect', () => { if (++connected === sockets.length) { fs.writeFileSync(flag, ''); for (const t of sockets) t.write('GET / HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n'); } });
  s.on('data', (d) => (raw += d));
  s.on('close', () => { if (raw.endsWith('served')) served++; if (++done === sockets.length) console.log('served ' + served); });
}
`;

/** One request on a new connection; resolves the answer's body. */
function ask(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => s.write('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
    let raw = '';
    s.on('data', (d) => (raw += d));
    s.on('end', () => resolve(raw.slice(raw.indexOf('\r\n\r\n') + 4)));
    s.on('error', reject);
  });
}

describe('addAcceptors', () => {
  it('adds the copies; the HTTP server serves what they accept; a burst queued during a blocked loop is all served', async () => {
    let viaCopy = 0;
    server = createServer((req, res) => {
      // The HTTP server sets socket.server to itself; _server stays the net.Server that accepted the socket.
      if ((req.socket as { _server?: unknown })._server !== server) viaCopy++;
      res.end('served');
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    acceptors = await addAcceptors(server, 8);
    expect(acceptors.count).toBe(8);
    // 40 clients in another process connect while this loop is blocked: the kernel queues them all (the flag file
    // says so); once the loop runs, the nine acceptors take them.
    const dir = mkdtempSync(join(tmpdir(), 'acceptors-'));
    const flag = join(dir, 'connected');
    const clients = spawn(process.execPath, ['-e', BURST, String(port), flag], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    clients.stdout.on('data', (d) => (out += d));
    const until = Date.now() + 10_000;
    while (!existsSync(flag) && Date.now() < until) {
      /* the loop is blocked until every client is connected */
    }
    expect(existsSync(flag)).toBe(true);
    await new Promise((r) => clients.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
    expect(out.trim()).toBe('served 40');
    expect(viaCopy).toBeGreaterThan(0);
  });

  it('closed, the copies take no more connections; the server still does', async () => {
    server = createServer((_req, res) => res.end('served'));
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    acceptors = await addAcceptors(server, 4);
    acceptors.close();
    acceptors = undefined;
    expect(await ask(port)).toBe('served');
  });

  it('0 copies: none added, no helper', async () => {
    server = createServer((_req, res) => res.end('served'));
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    expect((await addAcceptors(server, 0)).count).toBe(0);
  });
});
