import { IngestError } from '../problems.js';
import { LIMITS } from './limits.js';

/** Refuses a request holding one event larger than the limit. Only measured when the body could hold one. */
export function checkEventSizes(events: readonly unknown[], contentLength: string | undefined): void {
  const bodyBytes = contentLength === undefined ? Infinity : Number(contentLength);
  if (!(bodyBytes > LIMITS.maxEventBytes)) return;
  for (let i = 0; i < events.length; i++) {
    const size = Buffer.byteLength(JSON.stringify(events[i]));
    if (size > LIMITS.maxEventBytes) {
      throw new IngestError('tooLarge', `[${i}] is ${size} bytes; one event may hold at most ${LIMITS.maxEventBytes} bytes`);
    }
  }
}
