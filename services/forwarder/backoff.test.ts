import { describe, expect, it } from 'vitest';
import { retryDelayMs } from './backoff.js';

const policy = { baseMs: 100, maxMs: 5_000 };

describe('retryDelayMs (full jitter)', () => {
  it.each([
    [0, 1, 99],
    [1, 1, 199],
    [3, 1, 799],
    [10, 1, 4_999],
    [1_000, 1, 4_999],
    [-5, 1, 99],
    [3, 0, 0],
  ])('attempt %i with random %d gives %i ms', (attempt, r, expected) => {
    expect(retryDelayMs(attempt, policy, null, () => (r === 1 ? 0.9999999 : r))).toBe(expected);
  });

  it('spreads delays over the whole range', () => {
    const delays = Array.from({ length: 2000 }, () => retryDelayMs(4, policy));
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...delays)).toBeLessThan(1600);
    expect(Math.min(...delays)).toBeLessThan(200);
    expect(Math.max(...delays)).toBeGreaterThan(1400);
  });

  it('treats Retry-After as a floor', () => {
    expect(retryDelayMs(0, policy, 3_000, () => 0.5)).toBe(3_000);
    expect(retryDelayMs(10, policy, 10, () => 0.5)).toBe(2_500);
  });
});
