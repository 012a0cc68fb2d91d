import { describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../shared/logger.js';
import { BackgroundLoop, MAX_FAILURE_PAUSE_MS, MIN_GAP_MS, nextPauseMs } from './loop.js';

describe('nextPauseMs', () => {
  it.each([
    ['idle: the interval', 250, 0, false, 250],
    ['idle with a tiny interval: the floor', 0, 0, false, MIN_GAP_MS],
    ['woken after a good run: the floor, never zero', 250, 0, true, MIN_GAP_MS],
    ['first failure: twice the interval, even when woken', 100, 1, true, 200],
    ['repeated failures grow', 100, 3, false, 800],
    ['capped', 100, 30, true, MAX_FAILURE_PAUSE_MS],
    ['a zero interval still backs off', 0, 2, true, MIN_GAP_MS * 4],
  ])('%s', (_name, interval, failures, woken, expected) => {
    expect(nextPauseMs(interval, failures, woken)).toBe(expected);
  });
});

describe('BackgroundLoop', () => {
  /** Gaps between consecutive run times. */
  const gaps = (at: readonly number[]): number[] => at.slice(1).map((t, i) => t - at[i]!);

  it('never spins: a body that fails and wakes itself waits a growing pause, and timers keep firing', async () => {
    const at: number[] = [];
    const loop: BackgroundLoop = new BackgroundLoop(
      'failing',
      10,
      async () => {
        at.push(performance.now());
        loop.wake(); // what the sender did after every failed drain
        throw new Error('credentials do not open');
      },
      silentLogger,
    );
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    loop.start();
    try {
      await vi.waitFor(() => expect(at.length).toBeGreaterThanOrEqual(4), { timeout: 10_000, interval: 10 });
    } finally {
      clearInterval(timer);
      await loop.stop();
    }
    // Each pause at least the backoff after that many failures (a busy loop ran back to back and starved the timer);
    // a slow machine only makes the gaps longer. 1 ms of slack for the clocks' rounding.
    gaps(at).forEach((gap, i) => expect(gap).toBeGreaterThanOrEqual(nextPauseMs(10, i + 1, true) - 1));
    expect(ticks).toBeGreaterThan(0);
  });

  it('a woken healthy body waits the floor on a timer, so timers and sockets get their turn', async () => {
    const at: number[] = [];
    const loop: BackgroundLoop = new BackgroundLoop(
      'busy',
      1_000,
      async () => {
        at.push(performance.now());
        loop.wake();
      },
      silentLogger,
    );
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    loop.start();
    try {
      // Timers keep firing while the body wakes itself after every run.
      await vi.waitFor(() => expect(ticks).toBeGreaterThanOrEqual(10), { timeout: 10_000, interval: 10 });
    } finally {
      clearInterval(timer);
      await loop.stop();
    }
    expect(at.length).toBeGreaterThanOrEqual(2);
    for (const gap of gaps(at)) expect(gap).toBeGreaterThanOrEqual(MIN_GAP_MS - 1);
  });

  it('stop() ends a long failure pause at once', async () => {
    let failed!: () => void;
    const failure = new Promise<void>((r) => (failed = r));
    const loop = new BackgroundLoop(
      'stopper',
      10_000,
      async () => {
        failed();
        throw new Error('down');
      },
      silentLogger,
    );
    loop.start();
    await failure;
    // One turn of the event loop: the failure is handled and the 20 s pause has begun.
    await new Promise((r) => setImmediate(r));
    const t0 = Date.now();
    await loop.stop();
    // Far below the 20 s pause: stop() cut it short.
    expect(Date.now() - t0).toBeLessThan(10_000);
  });
});
