/**
 * The @platformatic/kafka producer every benchmark and experiment compares: idempotent, acks=all, the Java client's
 * partitioner (so keys land where kafkajs puts them), and kafkajs' timeouts from services/shared/kafka/client.ts
 * (1 s to connect, 10 s per request).
 */
import { compatibilityPartitioner, Producer, ProduceAcks } from '@platformatic/kafka';

export function platformaticProducer(clientId: string, brokers: string[]): Producer<Buffer, Buffer, Buffer, Buffer> {
  return new Producer<Buffer, Buffer, Buffer, Buffer>({
    clientId,
    bootstrapBrokers: brokers,
    idempotent: true,
    acks: ProduceAcks.ALL,
    partitioner: compatibilityPartitioner,
    connectTimeout: 1_000,
    requestTimeout: 10_000,
    retries: 2,
    retryDelay: 100,
  });
}
