/**
 * Retry delays: exponential backoff with full jitter (delay drawn uniformly from 0 to min(max, base·2^attempt)),
 * so retries of many connections spread out instead of arriving together; a Retry-After from the platform is a
 * floor. NOTE: no library: the retry state lives on the connection row (send_not_before, refresh_due_at) and
 * survives restarts and replicas, which promise-wrapping retry libraries do not model (docs/decisions.md).
 */
export interface BackoffPolicy {
  readonly baseMs: number;
  readonly maxMs: number;
}

/** attempt: 0 for the first retry. */
export function retryDelayMs(
  attempt: number,
  policy: BackoffPolicy,
  retryAfterMs: number | null = null,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.min(Math.max(attempt, 0), 30));
  const jittered = Math.floor(random() * ceiling);
  return retryAfterMs === null ? jittered : Math.max(retryAfterMs, jittered);
}
