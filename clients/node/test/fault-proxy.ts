/**
 * A real HTTP proxy in front of the real service that can answer for it (a 503 storm, a 413) or lose its answer
 * after the service accepted (the case idempotency keys exist for). Records what went through (and the API-Version
 * header each request carried).
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What to do with one request: pass it on, answer instead of the service, or pass it on and answer 503 anyway. */
export type Fault =
  | 'pass'
  | 'pass-then-503'
  | 'reset'
  | { status: number; retryAfter?: string; body?: unknown; contentType?: string };

export interface SeenRequest {
  readonly at: number;
  readonly bytes: number;
  readonly events: number;
  readonly keys: readonly string[];
  /** The request's API-Version header, as it arrived. */
  readonly apiVersion: string | undefined;
  /** What the client got. */
  status: number;
}

export interface FaultProxy {
  readonly url: string;
  readonly seen: SeenRequest[];
  /** Decides each request (n counts from 0 across the proxy's life). Default: pass. */
  plan: (n: number, req: IncomingMessage) => Fault;
  close(): Promise<void>;
}

export async function startFaultProxy(target: () => string): Promise<FaultProxy> {
  const seen: SeenRequest[] = [];
  let n = 0;
  const proxy: FaultProxy = {
    url: '',
    seen,
    plan: () => 'pass',
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    let events: Array<{ event_metadata?: { idempotency_key?: string } }> = [];
    try {
      events = JSON.parse(body.toString('utf8'));
    } catch {
      // not a batch
    }
    const record: SeenRequest = {
      at: Date.now(),
      bytes: body.length,
      events: Array.isArray(events) ? events.length : 0,
      keys: Array.isArray(events) ? events.map((e) => e.event_metadata?.idempotency_key ?? '') : [],
      apiVersion: typeof req.headers['api-version'] === 'string' ? req.headers['api-version'] : undefined,
      status: 0,
    };
    seen.push(record);
    const fault = proxy.plan(n++, req);
    if (fault === 'reset') {
      record.status = -1;
      req.socket.destroy();
      return;
    }
    if (typeof fault === 'object') {
      record.status = fault.status;
      res.writeHead(fault.status, {
        'content-type': fault.contentType ?? 'application/problem+json',
        ...(fault.retryAfter === undefined ? {} : { 'retry-after': fault.retryAfter }),
      });
      res.end(JSON.stringify(fault.body ?? { type: 'about:blank', title: 'injected', status: fault.status, detail: 'injected by the test proxy', instance: 'urn:test' }));
      return;
    }
    let upstream: Response;
    try {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) {
        if (typeof v === 'string' && !['host', 'connection', 'content-length', 'transfer-encoding'].includes(k)) headers[k] = v;
      }
      upstream = await fetch(`${target()}${req.url}`, { method: req.method, headers, body: req.method === 'GET' ? undefined : body });
    } catch {
      // The service is down: the client sees what it would see without the proxy, a refused connection.
      record.status = -1;
      req.socket.destroy();
      return;
    }
    const text = await upstream.text();
    if (fault === 'pass-then-503' && upstream.status < 300) {
      record.status = 503;
      res.writeHead(503, { 'content-type': 'application/problem+json' });
      res.end(JSON.stringify({ type: 'about:blank', title: 'lost answer', status: 503, detail: 'the answer was lost', instance: 'urn:test' }));
      return;
    }
    record.status = upstream.status;
    const out: Record<string, string> = {};
    upstream.headers.forEach((v, k) => {
      if (!['content-length', 'transfer-encoding', 'connection', 'keep-alive'].includes(k)) out[k] = v;
    });
    res.writeHead(upstream.status, out);
    res.end(text);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  (proxy as { url: string }).url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return proxy;
}
