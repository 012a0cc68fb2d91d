/**
 * Decodes a topic, one JSON line per record, on either runtime.
 *  - With KAFKA_BROKERS and SCHEMA_REGISTRY_URL set (and no --url): straight from Kafka, generically: each value's
 *    writer schema is fetched by the id in its Confluent wire format header (GET $SCHEMA_REGISTRY_URL/schemas/ids/<id>),
 *    so the output is the Avro record exactly as written (e.g. `payload_json` as text), read_committed.
 *  - Otherwise (the embedded default, or --url): through the running service's admin API
 *    (GET /admin/v1/topics/{topic}/records, ADMIN_TOKEN), which reads the embedded log or Kafka for it.
 *
 *   set -a; . infra/local/.env; set +a
 *   node dist/services/bin/decode.js <topic> [--last N] [--from-beginning] [--key-prefix PREFIX]
 *   ADMIN_TOKEN=… node dist/services/bin/decode.js <topic> --url http://localhost:8080 [--last N] …
 *
 * Default: the last 10 records of every partition. Tombstones print value null. `datateam decode` is the same command.
 */
import { parseArgs } from 'node:util';
import { loadConfig } from '../shared/config.js';
import { silentLogger } from '../shared/logger.js';
import { TOPIC_SPECS } from '../shared/topics.js';
import { KafkaAdmin } from '../shared/kafka/admin.js';
import { KafkaConnection } from '../shared/kafka/client.js';
import { readTopicRaw } from '../stream/kafka/reader.js';
import { SchemaRegistryClient } from '../stream/kafka/serde.js';
import { adminHttp, CliError, decodeOverHttp } from './cli/admin-http.js';

function usage(message?: string): never {
  if (message) process.stderr.write(`${message}\n`);
  process.stderr.write(
    `usage: bin/decode.js <topic> [--last N | --from-beginning] [--key-prefix PREFIX] [--url SERVICE_URL]\ntopics: ${TOPIC_SPECS.map((t) => t.name).join(', ')}\n`,
  );
  process.exit(2);
}

let parsed;
try {
  parsed = parseArgs({
    args: process.argv.slice(2),
    options: { last: { type: 'string' }, 'from-beginning': { type: 'boolean' }, 'key-prefix': { type: 'string' }, url: { type: 'string' } },
    allowPositionals: true,
    strict: true,
  });
} catch (err) {
  usage((err as Error).message);
}
const [topic, ...extra] = parsed.positionals;
if (!topic) usage('missing <topic>');
if (extra.length > 0) usage(`unexpected ${extra[0]}`);
const lastArg = parsed.values.last ?? '10';
if (!/^\d{1,9}$/.test(lastArg)) usage(`--last needs a whole number, got "${lastArg}"`);
const last = BigInt(lastArg);
const fromBeginning = parsed.values['from-beginning'] ?? false;
const keyPrefix = parsed.values['key-prefix'] ?? '';
const url = parsed.values.url;

// `… | head`: a closed pipe ends the output, not with a stack trace.
process.stdout.on('error', (err: NodeJS.ErrnoException) => process.exit(err.code === 'EPIPE' ? 0 : 1));

const config = loadConfig();
if (!config.kafka || url !== undefined) {
  // The embedded default keeps its log in the service's own store: ask the service.
  try {
    process.exitCode = await decodeOverHttp(adminHttp(url ?? `http://localhost:${config.port}`, process.env.ADMIN_TOKEN), topic, {
      last,
      fromBeginning,
      keyPrefix,
    });
  } catch (err) {
    if (!(err instanceof CliError)) throw err;
    process.stderr.write(`${err.message}\n`);
    process.exitCode = err.code;
  }
  process.exit();
}
const connection = new KafkaConnection({ brokers: config.kafka.brokers, groupPrefix: 'decode-cli-' }, silentLogger);
const admin = new KafkaAdmin(connection);
const registry = new SchemaRegistryClient(config.kafka.schemaRegistryUrl);
try {
  if (!(await admin.topicExists(topic))) usage(`no topic ${topic} on ${config.kafka.brokers.join(',')}`);
  const ends = await admin.endOffsets(topic);
  const from = new Map([...ends].map(([p, o]) => [p, fromBeginning || o.high - last < o.low ? o.low : o.high - last]));
  for (const r of await readTopicRaw(connection, admin, topic, { from, timeoutMs: 60_000 })) {
    if (!r.key.startsWith(keyPrefix)) continue;
    const schemaId = r.value && r.value.length >= 5 && r.value[0] === 0 ? r.value.readInt32BE(1) : null;
    let value: unknown = null;
    if (r.value !== null) {
      try {
        value = await registry.registry.decode(r.value);
      } catch (err) {
        value = { undecodable: (err as Error).message, base64: r.value.toString('base64') };
      }
    }
    process.stdout.write(
      `${JSON.stringify({ partition: r.partition, offset: r.offset.toString(), timestamp: new Date(r.timestamp).toISOString(), key: r.key, schema_id: schemaId, headers: r.headers, value })}\n`,
    );
  }
} finally {
  await admin.close();
}
