import { IngestError } from '../problems.js';
import { LIMITS } from './limits.js';

/**
 * An upper bound of `Buffer.byteLength(JSON.stringify(value))`, or Infinity as soon as it passes `budget`. Cheap:
 * no string is built. A string counts 6 bytes per UTF-16 unit (the most JSON.stringify can make of one: `\u001f`;
 * UTF-8 needs at most 3 per unit), plus its quotes.
 */
export function jsonBytesUpperBound(value: unknown, budget: number): number {
  switch (typeof value) {
    case 'string':
      return 2 + 6 * value.length;
    case 'number':
      return 24; // the longest JSON.stringify of a number (e.g. -2.2250738585072014e-308)
    case 'boolean':
      return 5;
    case 'object': {
      if (value === null) return 4;
      let n = 2;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          n += 1 + jsonBytesUpperBound(value[i], budget - n);
          if (n > budget) return Infinity;
        }
        return n;
      }
      for (const k in value) {
        if (!Object.prototype.hasOwnProperty.call(value, k)) continue;
        n += 4 + 6 * k.length + jsonBytesUpperBound((value as Record<string, unknown>)[k], budget - n);
        if (n > budget) return Infinity;
      }
      return n;
    }
    default:
      return 0; // undefined and functions are left out by JSON.stringify (JSON.parse never makes them)
  }
}

/**
 * Refuses a request holding one event larger than the limit. Only measured when the body could hold one; an event
 * is serialised (exact size) only when its cheap upper bound passes the limit, as serialising every event is costly.
 */
export function checkEventSizes(events: readonly unknown[], contentLength: string | undefined): void {
  const bodyBytes = contentLength === undefined ? Infinity : Number(contentLength);
  if (!(bodyBytes > LIMITS.maxEventBytes)) return;
  for (let i = 0; i < events.length; i++) {
    if (jsonBytesUpperBound(events[i], LIMITS.maxEventBytes) <= LIMITS.maxEventBytes) continue;
    const size = Buffer.byteLength(JSON.stringify(events[i]));
    if (size > LIMITS.maxEventBytes) {
      throw new IngestError('tooLarge', `[${i}] is ${size} bytes; one event may hold at most ${LIMITS.maxEventBytes} bytes`);
    }
  }
}
