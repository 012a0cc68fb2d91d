import { describe, expect, it } from 'vitest';
import { withRetries } from './retry.js';

const failing = (calls: number[]) => async (attempt: number): Promise<never> => {
  calls.push(performance.now());
  throw new Error(`call ${attempt} failed`);
};

describe('withRetries', () => {
  it('waits firstMs, then twice as long each time up to maxMs, and rejects with the last error after `attempts` calls', async () => {
    const calls: number[] = [];
    const delays: number[] = [];
    await expect(
      withRetries(failing(calls), { firstMs: 20, maxMs: 80, attempts: 5 }, { onRetry: (_e, _a, ms) => delays.push(ms) }),
    ).rejects.toThrow('call 5 failed');
    expect(delays).toEqual([20, 40, 80, 80]);
    expect(calls).toHaveLength(5);
    // Timers may fire a millisecond early by the clock they are measured with.
    calls.slice(1).forEach((at, i) => expect(at - calls[i]!).toBeGreaterThanOrEqual(delays[i]! - 1));
  });

  it('returns what a later call resolves with', async () => {
    let calls = 0;
    const out = await withRetries(async () => (++calls < 3 ? Promise.reject(new Error('not yet')) : 'ok'), { firstMs: 1, maxMs: 1, attempts: 5 });
    expect([out, calls]).toEqual(['ok', 3]);
  });

  it.each([
    ['a failure the caller says is final', new Error('refused'), () => false],
    ['a TypeError that is not a network failure (a bug, not an outage)', new TypeError('x is not a function'), undefined],
  ])('calls once and rejects on %s', async (_what, error, retryable) => {
    let calls = 0;
    const failures: number[] = [];
    const run = withRetries(
      async () => {
        calls += 1;
        throw error;
      },
      { firstMs: 1, maxMs: 1, attempts: 5 },
      { retryable, onFailure: (_e, attempt) => failures.push(attempt) },
    );
    await expect(run).rejects.toBe(error);
    expect([calls, failures]).toEqual([1, [1]]);
  });

  it('ends a wait at once when the signal aborts, and makes no call after it', async () => {
    const stop = new AbortController();
    const calls: number[] = [];
    const began = performance.now();
    const run = withRetries(failing(calls), { firstMs: 60_000, maxMs: 60_000, attempts: Infinity }, {
      signal: stop.signal,
      onRetry: () => setImmediate(() => stop.abort()),
    });
    await expect(run).rejects.toMatchObject({ name: 'AbortError' });
    expect(performance.now() - began).toBeLessThan(5_000);
    expect(calls).toHaveLength(1);
  });
});
