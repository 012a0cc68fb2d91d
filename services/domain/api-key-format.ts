/**
 * API key format: `evk_live_` or `evk_test_` + 32 base62 characters. The prefix tells live from test; only the
 * SHA-256 of the whole key is stored, with the first characters for display.
 */
import type { KeyMode } from './envelope.js';
import { randomBase62, sha256Hex } from '../shared/ids.js';

export const KEY_PREFIX: Readonly<Record<KeyMode, string>> = { live: 'evk_live_', test: 'evk_test_' };
const KEY_PATTERN = /^evk_(live|test)_[0-9A-Za-z]{32}$/;
const DISPLAY_LENGTH = 13;

export interface NewApiKey {
  readonly key: string;
  readonly hash: string;
  readonly displayStart: string;
}

export function generateApiKey(mode: KeyMode): NewApiKey {
  const key = KEY_PREFIX[mode] + randomBase62(32);
  return { key, hash: hashApiKey(key), displayStart: key.slice(0, DISPLAY_LENGTH) };
}

export const hashApiKey = (key: string): string => sha256Hex(key);

/** Cheap shape check before any lookup: junk never reaches the database. */
export const looksLikeApiKey = (key: string): boolean => KEY_PATTERN.test(key);
