/**
 * The service's one retry policy: exponential backoff without jitter (each wait twice the last, from `firstMs` up to
 * `maxMs`), at most `attempts` calls, and a wait that ends at once when `signal` aborts (shutdown). p-retry runs the
 * loop; this module only says it in the service's terms.
 */
import pRetry from 'p-retry';

export interface Backoff {
  /** The wait after the first failure; each later wait doubles, up to maxMs. */
  readonly firstMs: number;
  readonly maxMs: number;
  /** Calls in all, the first included (Infinity: until it succeeds or the signal aborts). */
  readonly attempts: number;
}

export interface RetryOptions {
  readonly signal?: AbortSignal;
  /** Whether a failure is worth another call (default: every one); called only when calls are left. */
  readonly retryable?: (err: Error) => boolean;
  /** After a failed call that will be retried, before the wait: for a log line. */
  readonly onRetry?: (err: Error, attempt: number, delayMs: number) => void;
  /** After every failed call, the last one included. */
  readonly onFailure?: (err: Error, attempt: number) => void;
}

/**
 * Calls fn until it resolves; rejects with its last error when no call is left or a failure is not retryable, and with
 * the signal's reason when the signal aborts (before a call or during a wait).
 * NOTE: p-retry never retries a TypeError other than a network one (a bug in the caller, not an outage).
 */
export function withRetries<T>(fn: (attempt: number) => Promise<T>, backoff: Backoff, opts: RetryOptions = {}): Promise<T> {
  return pRetry(fn, {
    retries: backoff.attempts - 1,
    factor: 2,
    minTimeout: backoff.firstMs,
    maxTimeout: backoff.maxMs,
    randomize: false,
    signal: opts.signal,
    onFailedAttempt: ({ error, attemptNumber }) => opts.onFailure?.(error, attemptNumber),
    shouldRetry: ({ error, attemptNumber, retryDelay }) => {
      if (opts.retryable && !opts.retryable(error)) return false;
      opts.onRetry?.(error, attemptNumber, retryDelay);
      return true;
    },
  });
}
