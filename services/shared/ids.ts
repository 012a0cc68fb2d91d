import { hash, randomBytes, randomUUID } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Random base62 string; rejection sampling keeps every character uniform. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const b of randomBytes(length * 2)) {
      if (b < 248 && out.length < length) out += BASE62[b % 62];
    }
  }
  return out;
}

export const newId = (prefix: string): string => `${prefix}_${randomBase62(16)}`;
export const newRequestId = (): string => randomUUID();
/** One-shot `crypto.hash`: a third of createHash's cost for the short strings hashed per event (node ids, user ids). */
export const sha256Hex = (value: string): string => hash('sha256', value, 'hex');
