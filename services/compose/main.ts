/**
 * Process entry: `node dist/services/compose/main.js`. Reads the config (fails in one line naming a bad variable),
 * starts the roles of SERVICE_ROLE, listens, and on SIGTERM/SIGINT stops taking requests, finishes in-flight
 * work and exits 0.
 */
import { existsSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { ConfigError, loadConfig, type Config } from '../shared/config.js';
import { createLogger } from '../shared/logger.js';
import { INTAKE_GROUP } from '../forwarder/intake.js';
import { pipelineStages } from './pipeline.js';
import { KafkaAdmin } from '../shared/kafka/admin.js';
import { KafkaConnection } from '../shared/kafka/client.js';
import { watchForScrape } from '../shared/metrics-scrape.js';
import { readReplayGauges } from '../replay/metrics.js';
import { addAcceptors, type Acceptors } from '../http/acceptors.js';
import { startMetricsServer } from '../shared/metrics-server.js';
import { Topics } from '../shared/topics.js';
import { startService } from './service.js';
import { MigrationChangedError } from '../shared/db/migrate.js';
import { tuneCollector } from '../shared/collector.js';

// Before any work: the collector's settings depend on the CPUs this process may use (shared/collector.ts).
const collectorTuning = tuneCollector();

/** A bad configuration: one line on stderr, exit code 1 (no stack trace). */
function failStart(message: string): never {
  process.stderr.write(`${message.replace(/\s+/g, ' ').trim()}\n`);
  process.exit(1);
}

/** Closes what started, but never waits more than 5 s for it (the start already failed). */
async function closeQuietly(close: () => Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([close().catch(() => undefined), new Promise((r) => (timer = setTimeout(r, 5_000)))]);
  clearTimeout(timer);
}

/** What a listen error says about the variable that caused it, or undefined for anything else. */
function listenProblem(err: unknown, variable: string, port: number, host: string): string | undefined {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'EADDRINUSE') return `invalid configuration: ${variable} ${port} is already in use on ${host}`;
  if (code === 'EACCES') return `invalid configuration: ${variable} ${port} needs privileges this process does not have`;
  if (code === 'EADDRNOTAVAIL') return `invalid configuration: HOST ${host} is not an address of this machine`;
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return `invalid configuration: HOST ${host} does not resolve`;
  return undefined;
}

/** Listens on the port and lets it go at once: the listen error, if any, of the real listen a moment later. */
async function probePort(port: number, host: string): Promise<unknown> {
  if (port === 0) return undefined;
  const probe = createServer();
  return new Promise((resolve) => {
    probe.once('error', resolve);
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve(undefined)));
  });
}

/** The listen backlog of the service's port. */
const LISTEN_BACKLOG = 4096;

let config: Config;
try {
  config = loadConfig();
} catch (err) {
  if (err instanceof ConfigError) failStart(err.message);
  throw err;
}

// Both ports are tried before anything is written to DATA_DIR, so a start that cannot listen leaves nothing behind.
for (const [variable, port] of [['PORT', config.port], ['METRICS_PORT', config.metricsPort]] as const) {
  const err = await probePort(port, config.host);
  if (err === undefined) continue;
  failStart(listenProblem(err, variable, port, config.host) ?? `cannot listen on ${variable} ${port}: ${String(err)}`);
}
// Printed before anything listens: by the time /readyz answers, the operator has the token.
if (config.adminTokenGenerated) {
  process.stdout.write(
    `\nADMIN_TOKEN was not set; the admin API token for this run is:\n\n  ${config.adminToken}\n\n` +
      `(set ADMIN_TOKEN to choose one)\n\n`,
  );
}
const keyFile = join(config.dataDir, 'credentials.key');
const keyFileExisted = existsSync(keyFile);
/** A port taken between the probe and the listen: the key this start generated goes too (nothing was sealed with it). */
function forgetGeneratedKey(): void {
  if (config.credentialsKey === undefined && !keyFileExisted) rmSync(keyFile, { force: true });
}

const logger = createLogger(config.logLevel, { role: config.role });
if (collectorTuning.length > 0) logger.info({ v8_flags: collectorTuning }, 'one CPU available: the collector scavenges on the main thread');
let service: Awaited<ReturnType<typeof startService>>;
try {
  service = await startService(config, logger);
} catch (err) {
  // An edited applied migration is the operator's to settle: one line naming the file, not a stack trace.
  if (!(err instanceof MigrationChangedError)) throw err;
  forgetGeneratedKey();
  failStart(err.message);
}
// Scrape-time gauges (shared/metrics-scrape.ts): lag and dead letters of the embedded log, connections, probes.
const kafkaAdmin = config.kafka
  ? new KafkaAdmin(new KafkaConnection({ brokers: config.kafka.brokers, clientId: 'event-forwarder-probe' }, logger), { retries: 0 })
  : undefined;
watchForScrape({
  db: service.db,
  embedded: config.kafka
    ? undefined
    : {
        consumers: [
          ...pipelineStages({ dedupeWindowMs: config.dedupeWindowMs }).map((p) => ({ group: p.name, topic: p.input })),
          { group: INTAKE_GROUP, topic: Topics.conversionsReady },
        ],
      },
  kafkaProbe: kafkaAdmin ? (ms) => kafkaAdmin.probe(ms) : undefined,
  readers: [readReplayGauges],
});
let metrics: Awaited<ReturnType<typeof startMetricsServer>>;
try {
  metrics = await startMetricsServer(config.metricsPort, config.host, {
    ready: async () => (await service.app.inject({ method: 'GET', url: '/readyz' })).statusCode === 200,
  });
} catch (err) {
  const problem = listenProblem(err, 'METRICS_PORT', config.metricsPort, config.host);
  if (problem === undefined) throw err;
  await closeQuietly(() => service.close());
  forgetGeneratedKey();
  failStart(problem);
}
try {
  // A backlog the size of a connection storm (the kernel caps it at net.core.somaxconn): with Node's 511, the
  // connections past it are dropped and their clients retry a second or more later.
  await service.app.listen({ port: config.port, host: config.host, backlog: LISTEN_BACKLOG });
} catch (err) {
  const problem = listenProblem(err, 'PORT', config.port, config.host);
  if (problem === undefined) throw err;
  await closeQuietly(() => service.close());
  await closeQuietly(() => new Promise<void>((resolve) => metrics.close(() => resolve())));
  forgetGeneratedKey();
  failStart(problem);
}

let acceptors: Acceptors = { count: 0, close: () => undefined };
try {
  acceptors = await addAcceptors(service.app.server, config.acceptors);
} catch (err) {
  // One acceptor still serves; only a burst of new connections under load waits longer (docs/operations.md).
  logger.warn({ err }, `could not add ${config.acceptors} acceptors (GATEWAY_ACCEPTORS); accepting on one`);
}

logger.info(
  { port: config.port, metrics_port: config.metricsPort, runtime: config.kafka ? 'kafka' : 'embedded', role: config.role, acceptors: 1 + acceptors.count },
  `ready on http://localhost:${config.port}`,
);

let stopping = false;
async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'shutting down: draining in-flight work');
  const force = setTimeout(() => {
    logger.error('shutdown took longer than 20 s; exiting');
    process.exit(1);
  }, 20_000);
  force.unref();
  try {
    acceptors.close();
    await service.close();
    await new Promise<void>((resolve) => metrics.close(() => resolve()));
    await kafkaAdmin?.close();
    logger.info('stopped');
    process.exit(0);
  } catch (err) {
    logger.error({ err }, 'shutdown failed');
    process.exit(1);
  }
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
