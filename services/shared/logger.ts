import pino, { type Logger } from 'pino';

export type { Logger };

/**
 * Structured JSON logs. Secrets never reach a log line: the redact list covers every place a key or token could
 * sit, and code logs key ids and hashes, never keys.
 */
export function createLogger(level: string, bindings: Record<string, unknown> = {}): Logger {
  return pino({
    level,
    base: { service: 'event-forwarder', ...bindings },
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers["access-token"]',
        'headers.authorization',
        'headers["access-token"]',
        '*.access_token',
        '*.refresh_token',
        '*.secret',
        '*.key',
        'access_token',
        'refresh_token',
        'secret',
      ],
      censor: '[redacted]',
    },
  });
}

export const silentLogger: Logger = pino({ level: 'silent' });
