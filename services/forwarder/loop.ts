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
