/**
 * A background job that polls: `run` at start, then again `intervalMs` after each run ends, never two at once, and at
 * once on `wake` when it is idle. A run that throws is reported to `failed` and the loop goes on. The timer does not
 * keep the process alive.
 */
export class PollLoop {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = true;
  private closing = false;

  constructor(
    private readonly opts: {
      readonly intervalMs: number;
      readonly run: () => Promise<unknown>;
      readonly failed: (err: unknown) => void;
    },
  ) {}

  /** True once stop() was called (a run's own loop checks it between its steps). */
  get stopping(): boolean {
    return this.closing;
  }

  start(): void {
    this.stopped = false;
    this.closing = false;
    this.schedule(0);
  }

  /** Work arrived: run now rather than at the next poll (a run in progress is not doubled). */
  wake(): void {
    if (this.stopped || this.running) return;
    clearTimeout(this.timer);
    this.schedule(0);
  }

  /** No more runs; waits for the one in progress. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.closing = true;
    clearTimeout(this.timer);
    await this.running;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.opts
        .run()
        .then(() => undefined)
        .catch((err: unknown) => this.opts.failed(err))
        .finally(() => {
          this.running = undefined;
          this.schedule(this.opts.intervalMs);
        });
    }, ms);
    this.timer.unref();
  }
}
