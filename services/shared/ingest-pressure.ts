/**
 * Ingestion pressure, shared by the parts of one process: the gateway marks it each time it sheds a
 * request; background work of the same process (the embedded runtime's stage loops) reads it and yields, so that
 * while clients are being turned away the process spends its time answering them, not on work that can wait (the
 * records are durable in the log; the stages catch up once the pressure is gone).
 */
let lastShedAt = -Infinity;

/** The gateway shed a request now. */
export function markIngestPressure(now = performance.now()): void {
  lastShedAt = now;
}

/** True when the gateway shed a request within the last `windowMs`. */
export function underIngestPressure(windowMs: number, now = performance.now()): boolean {
  return now - lastShedAt < windowMs;
}
