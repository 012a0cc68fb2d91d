/**
 * Platform tokens at rest: AES-256-GCM under CREDENTIALS_KEY. A ciphertext reads `<key id>:<base64(iv | tag | ct)>`;
 * the key id beside it names the key that sealed it, so after a rotation (new CREDENTIALS_KEY and
 * CREDENTIALS_KEY_ID, the old key in CREDENTIALS_PREVIOUS_KEYS) old rows stay readable and are re-sealed under the
 * current key by the refresher. The associated data binds a ciphertext to its row and purpose (e.g.
 * `ws_123:access`): a token copied into another workspace's row, or swapped for the refresh token, fails to open.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { ServiceError } from '../shared/errors.js';

const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;

export class TokenCipherError extends ServiceError {
  constructor(message: string) {
    super(message);
  }
}

export class TokenCipher {
  private readonly keys: ReadonlyMap<string, Buffer>;

  constructor(
    readonly currentKeyId: string,
    currentKey: Buffer,
    previousKeys: ReadonlyMap<string, Buffer> = new Map(),
  ) {
    if (!KEY_ID.test(currentKeyId)) throw new TokenCipherError(`bad key id ${JSON.stringify(currentKeyId)}`);
    const keys = new Map(previousKeys);
    keys.set(currentKeyId, currentKey);
    for (const [id, key] of keys) {
      if (!KEY_ID.test(id)) throw new TokenCipherError(`bad key id ${JSON.stringify(id)}`);
      if (key.length !== 32) throw new TokenCipherError(`key ${id} must be 32 bytes`);
    }
    this.keys = keys;
  }

  seal(plaintext: string, associated: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.keys.get(this.currentKeyId)!, iv);
    cipher.setAAD(Buffer.from(associated, 'utf8'));
    const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return `${this.currentKeyId}:${Buffer.concat([iv, cipher.getAuthTag(), ct]).toString('base64')}`;
  }

  open(sealed: string, associated: string): string {
    const colon = sealed.indexOf(':');
    if (colon <= 0) throw new TokenCipherError('not a sealed token');
    const keyId = sealed.slice(0, colon);
    const key = this.keys.get(keyId);
    if (!key) throw new TokenCipherError(`no key with id ${keyId}: add it to CREDENTIALS_PREVIOUS_KEYS`);
    const raw = Buffer.from(sealed.slice(colon + 1), 'base64');
    if (raw.length < IV_BYTES + TAG_BYTES) throw new TokenCipherError('sealed token is truncated');
    const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(associated, 'utf8'));
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      throw new TokenCipherError('sealed token does not open: wrong key, wrong row or tampered');
    }
  }

  /** Ids of the older keys this cipher can still open. */
  get previousKeyIds(): string[] {
    return [...this.keys.keys()].filter((id) => id !== this.currentKeyId);
  }

  /** True when the ciphertext was sealed under an older key and should be re-sealed. */
  isStale(sealed: string): boolean {
    return !sealed.startsWith(`${this.currentKeyId}:`);
  }
}

/** Associated data of each sealed value: the row and the purpose. */
export const tokenAad = {
  access: (workspaceId: string): string => `${workspaceId}:access`,
  refresh: (workspaceId: string): string => `${workspaceId}:refresh`,
  verifier: (stateHash: string): string => `${stateHash}:pkce`,
};
