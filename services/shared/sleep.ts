import { setTimeout as delay } from 'node:timers/promises';

/** Waits `ms`, or less: resolves (never rejects) as soon as `signal` aborts, at once if it already has. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return delay(ms, undefined, { signal }).catch(() => undefined);
}
