/**
 * An event's own time (API-Version 2026-12-01 and later): an RFC 3339 date-time with an offset, or an integer of Unix
 * seconds, within [request − 7 days, request + 5 minutes]. Read by both endpoints' normalisers; a bad value refuses
 * the whole request with 400 `invalid-event-time` naming the event (docs/decisions.md).
 */
import { IngestError } from '../problems.js';
import { LIMITS } from './limits.js';

// Date and time with seconds and a mandatory offset (RFC 3339 §5.6); fractions of a second are kept to the millisecond.
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

/** Epoch ms of `value` (the field at `path`, e.g. `[3].event_time`), checked against the request's receive time. */
export function parseEventTime(value: unknown, path: string, receivedAt: number): number {
  let ms: number;
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) throw new IngestError('eventTime', `${path} must be an integer of Unix seconds; got ${value}`);
    ms = value * 1000;
  } else if (typeof value === 'string') {
    const m = RFC3339.exec(value);
    if (!m) {
      throw new IngestError(
        'eventTime',
        `${path} must be an RFC 3339 date-time with an offset (e.g. 2026-11-21T18:04:05Z) or Unix seconds; got "${value.slice(0, 40)}"`,
      );
    }
    ms = Date.parse(value.toUpperCase().replace(' ', 'T'));
    // Date.parse rolls some impossible dates over (Feb 30 → Mar 2): compare the calendar date it read back.
    const [, y, mo, d] = m;
    const offsetMin = m[8]!.toUpperCase() === 'Z' ? 0 : (m[8]![0] === '-' ? -1 : 1) * (Number(m[8]!.slice(1, 3)) * 60 + Number(m[8]!.slice(4, 6)));
    const local = new Date(ms + offsetMin * 60_000);
    if (
      Number.isNaN(ms) ||
      local.getUTCFullYear() !== Number(y) ||
      local.getUTCMonth() + 1 !== Number(mo) ||
      local.getUTCDate() !== Number(d)
    ) {
      throw new IngestError('eventTime', `${path} is not a real date-time: "${value}"`);
    }
  } else {
    throw new IngestError('eventTime', `${path} must be an RFC 3339 date-time string or an integer of Unix seconds`);
  }
  if (ms < receivedAt - LIMITS.maxEventAgeMs) {
    throw new IngestError(
      'eventTime',
      `${path} (${new Date(ms).toISOString()}) is more than 7 days before the request (${new Date(receivedAt).toISOString()}); older events cannot be sent`,
    );
  }
  if (ms > receivedAt + LIMITS.maxEventLeadMs) {
    const hint = typeof value === 'number' && value > 1e11 ? ' (milliseconds sent as seconds?)' : '';
    throw new IngestError(
      'eventTime',
      `${path} (${Number.isFinite(ms) && Math.abs(ms) < 8.64e15 ? new Date(ms).toISOString() : value}) is more than 5 minutes after the request (${new Date(receivedAt).toISOString()})${hint}`,
    );
  }
  return ms;
}
