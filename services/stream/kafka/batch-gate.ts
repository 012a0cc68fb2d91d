/**
 * Batches of several partitions run together; a punctuator runs alone (stream/contract.ts: never concurrently with
 * a batch). A punctuator waits for the batches in flight to finish, and batches that start meanwhile wait for it.
 */
export class BatchGate {
  private running = 0;
  private exclusive: Promise<void> | undefined;
  private idle: Array<() => void> = [];

  async batch<T>(fn: () => Promise<T>): Promise<T> {
    while (this.exclusive) await this.exclusive;
    this.running++;
    try {
      return await fn();
    } finally {
      if (--this.running === 0) for (const wake of this.idle.splice(0)) wake();
    }
  }

  async alone(fn: () => Promise<void>): Promise<void> {
    while (this.exclusive) await this.exclusive;
    let release!: () => void;
    this.exclusive = new Promise<void>((resolve) => (release = resolve));
    try {
      if (this.running > 0) await new Promise<void>((resolve) => this.idle.push(resolve));
      await fn();
    } finally {
      this.exclusive = undefined;
      release();
    }
  }
}
