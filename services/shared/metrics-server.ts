import { createServer, type Server } from 'node:http';
import { registry } from './metrics.js';
import { refreshScrapeGauges } from './metrics-scrape.js';

export interface MetricsServerOptions {
  /** Readiness as `GET /readyz` on PORT answers it (the database, and on a gateway the broker). */
  readonly ready: () => Promise<boolean>;
}

/**
 * Prometheus `GET /metrics` on its own port (METRICS_PORT), apart from the API, with `GET /healthz` (the process
 * answers) and `GET /readyz` (200 when ready, else 503) beside it, as docs/operations.md says every process serves.
 */
export async function startMetricsServer(port: number, host: string, opts: MetricsServerOptions): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const json = (status: number, body: unknown): void => {
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { Allow: 'GET, HEAD', 'Content-Type': 'text/plain' });
      res.end('only GET\n');
      return;
    }
    if (path === '/metrics') {
      refreshScrapeGauges()
        .then(() => registry.metrics())
        .then((body) => {
          res.writeHead(200, { 'Content-Type': registry.contentType });
          res.end(body);
        })
        .catch(() => {
          res.writeHead(500);
          res.end();
        });
      return;
    }
    if (path === '/healthz') return json(200, { status: 'ok' });
    if (path === '/readyz') {
      opts
        .ready()
        .catch(() => false)
        .then((ok) => json(ok ? 200 : 503, { status: ok ? 'ready' : 'not ready' }));
      return;
    }
    res.writeHead(404, { 'Content-Type': 'text/plain' });
    res.end('this port serves /metrics, /healthz and /readyz\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}
