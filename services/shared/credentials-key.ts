import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from './logger.js';

/**
 * The key that encrypts platform tokens at rest: CREDENTIALS_KEY, or one generated once into DATA_DIR (with a
 * warning: whoever can read DATA_DIR can read the key, so production sets CREDENTIALS_KEY from a secret store).
 */
export function resolveCredentialsKey(configured: Buffer | undefined, dataDir: string, logger: Logger): Buffer {
  if (configured) return configured;
  const file = join(dataDir, 'credentials.key');
  if (existsSync(file)) {
    const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
    if (key.length !== 32) throw new Error(`${file} does not hold base64 of 32 bytes`);
    logger.warn({ file }, 'CREDENTIALS_KEY is unset: using the key generated in DATA_DIR; set CREDENTIALS_KEY in production');
    return key;
  }
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const key = randomBytes(32);
  writeFileSync(file, key.toString('base64') + '\n', { mode: 0o600 });
  logger.warn({ file }, 'CREDENTIALS_KEY is unset: generated a key into DATA_DIR; set CREDENTIALS_KEY in production');
  return key;
}
