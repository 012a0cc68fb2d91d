import type { TopicName } from '../shared/topics.js';
import { ServiceError } from '../shared/errors.js';

export interface ProducedRecord<V = unknown> {
  readonly key: string;
  readonly value: V;
}

/** Thrown when records could not be made durable before the caller's deadline. Nothing of them was written. */
export class NotDurableError extends ServiceError {
  constructor(message: string, readonly retryAfterSeconds = 1) {
    super(message, { retryable: true });
  }
}

/**
 * How the gateway makes events durable. Both runtimes implement it: the embedded log (a table, group-committed)
 * and Kafka (acks=all, idempotent producer). append() resolves only once the records are durable; it rejects
 * with NotDurableError when that cannot happen before `deadline` (epoch ms).
 */
export interface EventLogProducer {
  append(topic: TopicName, records: readonly ProducedRecord[], deadline: number): Promise<void>;
  /** True while the log can take writes (readiness). */
  healthy(): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * Takes the next group of queued appends for one commit: whole requests, in order, up to `max` records (a single
 * request larger than that goes alone). Both logs group-commit this way.
 */
export function takeGroup<P extends { readonly records: readonly unknown[] }>(queue: P[], max: number): P[] {
  let n = 0;
  let i = 0;
  while (i < queue.length && (i === 0 || n + queue[i]!.records.length <= max)) {
    n += queue[i]!.records.length;
    i++;
  }
  return queue.splice(0, i);
}
