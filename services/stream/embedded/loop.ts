/**
 * The consumer loop over the embedded log, for whatever consumes a topic batch by batch (the stage runner): step
 * until the input is drained (a step that finds nothing, or reads less than it asked for), then wait for an append
 * (or `idleWaitMs`); back off on errors; yield to the event loop between batches, and more while the gateway of the
 * same process sheds requests (shared/ingest-pressure.ts).
 */
import type { TopicName } from '../../shared/topics.js';
import { underIngestPressure } from '../../shared/ingest-pressure.js';
import { sleep } from '../../shared/sleep.js';
import type { EmbeddedLog } from './log.js';

/** What one batch did. */
export interface Step {
  /** Input records consumed. */
  readonly consumed: number;
  /**
   * It read fewer records than it asked for: the input was drained when it read, so the loop waits for the next
   * append (or one announced since that read) rather than reading again to find nothing.
   */
  readonly drained: boolean;
}

export interface LoopOptions {
  readonly log: EmbeddedLog;
  readonly topic: TopicName;
  /** One batch. */
  readonly step: () => Promise<Step>;
  /** Housekeeping between batches (never concurrent with one). */
  readonly between?: () => Promise<void>;
  readonly idleWaitMs?: number;
  readonly onError: (err: unknown) => void;
}

/** How recent a shed counts as pressure, and the longest pause between two batches under it (ms). */
const PRESSURE_WINDOW_MS = 1_000;
const PRESSURE_MAX_PAUSE_MS = 1_000;

export class EmbeddedConsumerLoop {
  private readonly abort = new AbortController();
  private running: Promise<void> | undefined;

  constructor(private readonly opts: LoopOptions) {}

  start(): void {
    this.running ??= this.run();
  }

  /** Finishes the batch in flight, then stops. */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.running;
  }

  /** Steps until the input is drained (tests and shutdown). Returns the number of records consumed. */
  async drain(): Promise<number> {
    let total = 0;
    for (;;) {
      const { consumed } = await this.opts.step();
      if (consumed === 0) return total;
      total += consumed;
    }
  }

  private async run(): Promise<void> {
    let backoff = 100;
    while (!this.abort.signal.aborted) {
      try {
        await this.opts.between?.();
        const started = performance.now();
        // Taken before the step reads: an append announced after it wakes the wait below at once.
        const since = this.opts.log.announcedTo(this.opts.topic);
        const { consumed, drained } = await this.opts.step();
        backoff = 100;
        const idle = (): Promise<void> => this.opts.log.waitForAppend(this.opts.topic, this.opts.idleWaitMs ?? 500, this.abort.signal, since);
        if (consumed === 0) await idle();
        // While the gateway of this process sheds requests, pause three times the batch's time: the stages slow
        // down, never stop.
        else if (underIngestPressure(PRESSURE_WINDOW_MS)) await sleep(Math.min(PRESSURE_MAX_PAUSE_MS, 3 * (performance.now() - started)), this.abort.signal);
        else if (drained) await idle();
        // Otherwise yield once per batch: requests get parsed and their appends queue before the next transaction.
        else await new Promise((r) => setImmediate(r));
      } catch (err) {
        this.opts.onError(err);
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 5_000);
      }
    }
  }
}
