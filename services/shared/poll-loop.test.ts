import { describe, expect, it } from 'vitest';
import { PollLoop } from './poll-loop.js';

const gate = () => {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
};
const until = async (ok: () => boolean): Promise<void> => {
  for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(ok()).toBe(true);
};

describe('PollLoop', () => {
  it('runs at start and again after the interval, one run at a time; wake during a run does not double it', async () => {
    let runs = 0;
    let inFlight = 0;
    let most = 0;
    const held = gate();
    const loop = new PollLoop({
      intervalMs: 20,
      run: async () => {
        runs++;
        most = Math.max(most, ++inFlight);
        if (runs === 1) await held.promise;
        inFlight--;
      },
      failed: () => undefined,
    });
    loop.start();
    await until(() => runs === 1);
    loop.wake();
    loop.wake();
    await new Promise((r) => setTimeout(r, 30));
    expect(runs).toBe(1);
    held.open();
    await until(() => runs >= 3);
    expect(most).toBe(1);
    await loop.stop();
  });

  it('wake when idle runs at once, not after the interval', async () => {
    let runs = 0;
    const loop = new PollLoop({ intervalMs: 60_000, run: async () => void runs++, failed: () => undefined });
    loop.start();
    await until(() => runs === 1);
    loop.wake();
    await until(() => runs === 2);
    await loop.stop();
  });

  it('a run that throws is reported and the loop goes on', async () => {
    const errors: unknown[] = [];
    let runs = 0;
    const loop = new PollLoop({
      intervalMs: 5,
      run: async () => {
        if (++runs === 1) throw new Error('database gone');
      },
      failed: (err) => errors.push(err),
    });
    loop.start();
    await until(() => runs >= 2);
    await loop.stop();
    expect(errors).toHaveLength(1);
    expect(String(errors[0])).toContain('database gone');
  });

  it('stop waits for the run in progress, says so to it, and no run starts after it', async () => {
    const held = gate();
    let runs = 0;
    let sawStopping = false;
    const loop = new PollLoop({
      intervalMs: 1,
      run: async () => {
        runs++;
        await held.promise;
        sawStopping = loop.stopping;
      },
      failed: () => undefined,
    });
    expect(loop.stopping).toBe(false);
    loop.start();
    await until(() => runs === 1);
    let stopped = false;
    const stopping = loop.stop().then(() => (stopped = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(stopped).toBe(false);
    held.open();
    await stopping;
    expect(sawStopping).toBe(true);
    loop.wake();
    await new Promise((r) => setTimeout(r, 20));
    expect(runs).toBe(1);
  });
});
