/** Errors that carry a type, whether a retry can help, a cause and context (never a secret). */
export class ServiceError extends Error {
  constructor(
    readonly type: string,
    message: string,
    readonly opts: { retryable?: boolean; cause?: unknown; context?: Record<string, unknown>; statusCode?: number } = {},
  ) {
    super(message, { cause: opts.cause });
    this.name = 'ServiceError';
  }
  get retryable(): boolean {
    return this.opts.retryable ?? false;
  }
  get statusCode(): number | undefined {
    return this.opts.statusCode;
  }
}
