/**
 * The one base error of the service: its name is its class, `retryable` says whether the same operation may succeed
 * later (an outage, a deadline) or never will (bad input, bad configuration, a bug), and the cause is kept. Log it as
 * `{ err }` so the logger keeps the stack; never only its message.
 */
export class ServiceError extends Error {
  readonly retryable: boolean;

  constructor(message: string, opts: { readonly retryable?: boolean; readonly cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.retryable = opts.retryable ?? false;
  }
}
