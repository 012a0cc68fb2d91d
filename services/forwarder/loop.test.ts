import { describe, expect, it } from 'vitest';
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
  it('never spins: a body that fails and wakes itself runs a handful of times, and timers keep firing', async () => {
    let runs = 0;
    const loop: BackgroundLoop = new BackgroundLoop(
      'failing',
      10,
      async () => {
        runs++;
        loop.wake(); // what the sender did after every failed drain
        throw new Error('credentials do not open');
      },
      silentLogger,
    );
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    loop.start();
    await new Promise((r) => setTimeout(r, 400));
    clearInterval(timer);
    await loop.stop();
    // 10, 20, 40, 80, 160 ms pauses: at most 6 runs in 400 ms (a busy loop made millions and starved the timer).
    expect(runs).toBeGreaterThanOrEqual(2);
    expect(runs).toBeLessThanOrEqual(6);
    expect(ticks).toBeGreaterThan(10);
  });

  it('a woken healthy body waits the floor on a timer, so timers and sockets get their turn', async () => {
    let runs = 0;
    const loop: BackgroundLoop = new BackgroundLoop(
      'busy',
      1_000,
      async () => {
        runs++;
        loop.wake();
      },
      silentLogger,
    );
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    loop.start();
    await new Promise((r) => setTimeout(r, 300));
    clearInterval(timer);
    await loop.stop();
    expect(runs).toBeLessThanOrEqual(300 / MIN_GAP_MS + 1);
    expect(ticks).toBeGreaterThan(10);
  });

  it('stop() ends a long failure pause at once', async () => {
    const loop = new BackgroundLoop('stopper', 10_000, async () => Promise.reject(new Error('down')), silentLogger);
    loop.start();
    await new Promise((r) => setTimeout(r, 20));
    const t0 = Date.now();
    await loop.stop();
    expect(Date.now() - t0).toBeLessThan(1_000);
  });
});
