/**
 * A background loop: runs `body`, waits `intervalMs` (or until woken), repeats. A failing body is logged and
 * retried after a growing pause instead of crashing the process; stop() lets the body in flight finish.
 */
import type { Logger } from '../shared/logger.js';

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
      if (this.woken) continue;
      const pause = failures === 0 ? this.intervalMs : Math.min(this.intervalMs * 2 ** failures, 30_000);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, pause);
        function done(): void {
          clearTimeout(timer);
          resolve();
        }
        this.wakeUp = done;
      });
      this.wakeUp = undefined;
    }
  }
}
