/**
 * The Kafka client of the service. services/shared/kafka/ is the ONLY place that imports a Kafka client (kafkajs for
 * the group consumers, @platformatic/kafka for every producer and the admin) and
 * @kafkajs/confluent-schema-registry: kafkajs is unmaintained since 2023, so everything above this folder speaks
 * in the service's own types (KafkaConnection, GroupConsumer, TransactionalProducer, IdempotentProducer, AvroSerde)
 * and the client can be swapped (e.g. for @confluentinc/kafka-javascript) by rewriting this folder alone.
 */
import { lz4Compress, lz4Decompress } from '@platformatic/wasm-utils';
import kafkajs, { Kafka, logLevel, type LogEntry } from 'kafkajs';
import type { Logger } from '../logger.js';

export interface KafkaSettings {
  readonly brokers: readonly string[];
  /** Prefix of consumer group ids and transactional ids (several deployments or test runs on one cluster). */
  readonly groupPrefix?: string;
  /** Consumer session timeout: how long a consumer that died (kill -9) keeps its partitions. */
  readonly sessionTimeoutMs?: number;
  readonly clientId?: string;
}

/**
 * The stages' transactional producers compress their record batches with LZ4 (producer.ts), which kafkajs reads only
 * with a codec registered: the one @platformatic/kafka writes with (Kafka's LZ4 frame format).
 */
kafkajs.CompressionCodecs[kafkajs.CompressionTypes.LZ4] = () => ({
  compress: async (encoder: { buffer: Buffer }) => lz4Compress(encoder.buffer),
  decompress: async (buffer: Buffer) => lz4Decompress(buffer),
});

/** kafkajs log lines that are expected and handled by this module (see the NOTE at each use). */
const EXPECTED_WARNINGS = [
  // The gateway's idempotent producer bounds its retries on purpose and is rebuilt after a failure (stream/kafka/log.ts).
  'Limiting retries for the idempotent producer may invalidate EoS guarantees',
];

/** Maps kafkajs log entries onto pino: warn and error only (kafkajs is chatty at info). */
function logCreator(logger: Logger) {
  return () =>
    ({ namespace, level, log }: LogEntry): void => {
      const { message, timestamp: _ts, logger: _l, ...extra } = log;
      if (EXPECTED_WARNINGS.some((w) => message.includes(w))) return;
      const fields = { kafka: namespace, ...extra };
      // NOTE: kafkajs logs every protocol error answer at error level, retriable ones included (coordinator loading,
      // concurrent transactions, rebalance in progress); the caller retries or reports the failure itself.
      if (namespace === 'Connection' && message.startsWith('Response ')) logger.debug(fields, `kafka: ${message}`);
      else if (level === logLevel.ERROR) logger.error(fields, `kafka: ${message}`);
      else if (level === logLevel.WARN) logger.warn(fields, `kafka: ${message}`);
      else logger.debug(fields, `kafka: ${message}`);
    };
}

/** One client per process: producers, consumers and admins are created from it. */
export class KafkaConnection {
  readonly kafka: Kafka;
  readonly clientId: string;
  readonly groupPrefix: string;
  readonly sessionTimeoutMs: number;

  constructor(
    readonly settings: KafkaSettings,
    readonly logger: Logger,
  ) {
    this.clientId = settings.clientId ?? 'event-forwarder';
    this.groupPrefix = settings.groupPrefix ?? '';
    this.sessionTimeoutMs = settings.sessionTimeoutMs ?? 10_000;
    this.kafka = new Kafka({
      clientId: this.clientId,
      brokers: [...settings.brokers],
      // NOTE: short connection and request timeouts: the gateway must notice a dead broker inside its 1.5 s deadline,
      // and stages retry whole batches themselves.
      connectionTimeout: 1_000,
      requestTimeout: 10_000,
      retry: { initialRetryTime: 100, maxRetryTime: 2_000, retries: 8 },
      logLevel: logLevel.WARN,
      logCreator: logCreator(logger),
    });
  }

  /** The client id of one of the process's other clients (the @platformatic/kafka producers): `<client id>-<role>`. */
  clientIdFor(role: string): string {
    return `${this.clientId}-${role}`;
  }

  /** The consumer group id of a stage (and the prefix of its transactional ids). */
  groupId(name: string): string {
    return `${this.groupPrefix}${name}`;
  }
}
