/**
 * A background loop: runs `body`, waits `intervalMs` (or until woken), repeats. A failing body is logged and
 * retried after a growing pause instead of crashing the process; stop() lets the body in flight finish.
 * NOTE: no path runs the body back to back. A wake after a good run still waits MIN_GAP_MS on a timer (a
 * macrotask: the HTTP server's sockets get their turn even when the body's I/O resolves in microtasks, as PGlite's
 * does), and after a failure wakes are ignored: the pause grows from intervalMs to 30 s. A body that fails on
 * every run can therefore never pin the event loop that serves HTTP.
 */
import type { Logger } from '../shared/logger.js';

/** The shortest pause between two runs of a body, even when woken. */
export const MIN_GAP_MS = 5;
/** The longest pause after repeated failures. */
export const MAX_FAILURE_PAUSE_MS = 30_000;

/** The pause before the next run: a floor always, a backoff after failures (woken or not). */
export function nextPauseMs(intervalMs: number, failures: number, woken: boolean): number {
  if (failures > 0) return Math.min(Math.max(intervalMs, MIN_GAP_MS) * 2 ** Math.min(failures, 20), MAX_FAILURE_PAUSE_MS);
  return woken ? MIN_GAP_MS : Math.max(intervalMs, MIN_GAP_MS);
}

export class BackgroundLoop {
  private stopped = false;
  private running: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private woken = false;

  constructor(
    private readonly name: string,
    private readonly intervalMs: number,
    private readonly body: () => Promise<void>,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.running ??= this.run();
  }

  /** Runs the body again as soon as the one in flight (if any) is done. */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wakeUp?.();
    await this.running;
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      this.woken = false;
      try {
        await this.body();
        failures = 0;
      } catch (err) {
        failures++;
        this.logger.error({ err, loop: this.name }, 'background loop failed; retrying');
      }
      if (this.stopped) break;
      const pause = nextPauseMs(this.intervalMs, failures, this.woken);
      const wakeable = failures === 0 && !this.woken;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, pause);
        function done(): void {
          clearTimeout(timer);
          resolve();
        }
        // After a failure only stop() cuts the pause short; a wake is remembered for the next run.
        this.wakeUp = wakeable ? done : () => (this.stopped ? done() : undefined);
      });
      this.wakeUp = undefined;
    }
  }
}

/**
 * A sender's loop of concurrent drains, one per key (a connection, a destination) at a time and at most
 * `concurrency` at once, so one slow account never stalls the others. `tick` (run by the loop, polled at half the
 * linger, 10–250 ms) looks for keys with work and hands them to `drainAll`. A drain that fails unexpectedly (a
 * database error, a bug) is handed to `failed`, which backs its key off, and does not wake the loop; one that ends
 * well wakes it, since more may be ready. stop() lets the drains in flight finish.
 */
export class DrainLoop {
  private readonly loop: BackgroundLoop;
  private readonly inflight = new Map<string, Promise<void>>();
  private stopped = false;

  constructor(
    private readonly opts: {
      readonly name: string;
      readonly lingerMs: number;
      readonly logger: Logger;
      readonly concurrency: number;
      readonly tick: () => Promise<void>;
      readonly drain: (key: string) => Promise<void>;
      readonly failed: (key: string, err: unknown) => Promise<void>;
    },
  ) {
    const poll = Math.min(250, Math.max(10, Math.floor(opts.lingerMs / 2)));
    this.loop = new BackgroundLoop(opts.name, poll, opts.tick, opts.logger);
  }

  run(): void {
    this.loop.start();
  }

  wake(): void {
    this.loop.wake();
  }

  get stopping(): boolean {
    return this.stopped;
  }

  /** Stops looking for work; the drains in flight finish. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop.stop();
    await Promise.all(this.inflight.values());
  }

  /** How many more drains may start now. */
  get free(): number {
    return this.opts.concurrency - this.inflight.size;
  }

  /** The keys with a drain (or exclusive work) in flight: no tick needs to look for their work. */
  get draining(): string[] {
    return [...this.inflight.keys()];
  }

  /** Starts a drain for each key not already draining, while there is room. */
  drainAll(keys: readonly string[]): void {
    for (const key of keys) {
      if (this.inflight.size >= this.opts.concurrency) break;
      if (this.inflight.has(key)) continue;
      const drain = this.opts
        .drain(key)
        .then(
          () => true,
          async (err: unknown) => {
            await this.opts.failed(key, err);
            return false;
          },
        )
        .then((ok) => {
          this.inflight.delete(key);
          if (ok && !this.stopped) this.loop.wake();
        });
      this.inflight.set(key, drain);
    }
  }

  /** Runs other work on a key as one of its drains (none of that key meanwhile); false when one is in flight. */
  async exclusive(key: string, work: () => Promise<void>): Promise<boolean> {
    if (this.inflight.has(key)) return false;
    const running = work();
    this.inflight.set(key, running);
    try {
      await running;
    } finally {
      this.inflight.delete(key);
    }
    return true;
  }
}
