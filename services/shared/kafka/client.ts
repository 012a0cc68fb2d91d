/**
 * The Kafka client of the service. services/shared/kafka/ is the ONLY place that imports a Kafka client
 * (@platformatic/kafka: the group consumers, every producer and the admin) and @kafkajs/confluent-schema-registry, so
 * everything above this folder speaks in the service's own types (KafkaConnection, GroupConsumer,
 * TransactionalProducer, IdempotentProducer, KafkaAdmin, AvroSerde) and the client can be swapped by rewriting this
 * folder alone.
 */
import type { Logger } from '../logger.js';

export interface KafkaSettings {
  readonly brokers: readonly string[];
  /** Prefix of consumer group ids and transactional ids (several deployments or test runs on one cluster). */
  readonly groupPrefix?: string;
  /** Consumer session timeout: how long a consumer that died (kill -9) keeps its partitions. */
  readonly sessionTimeoutMs?: number;
  readonly clientId?: string;
}

/** The process's Kafka settings: producers, consumers and admins are created from it, each a client of its own. */
export class KafkaConnection {
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
  }

  /** The client id of one of the process's clients: `<client id>-<role>`. */
  clientIdFor(role: string): string {
    return `${this.clientId}-${role}`;
  }

  /** The consumer group id of a stage (and the prefix of its transactional ids). */
  groupId(name: string): string {
    return `${this.groupPrefix}${name}`;
  }
}
