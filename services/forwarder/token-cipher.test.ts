import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { TokenCipher, TokenCipherError, tokenAad } from './token-cipher.js';

const k1 = randomBytes(32);
const k2 = randomBytes(32);

describe('TokenCipher', () => {
  it('round-trips and never shows the plaintext in the ciphertext', () => {
    const c = new TokenCipher('k1', k1);
    const sealed = c.seal('act.secret-token-value', tokenAad.access('ws_1'));
    expect(sealed.startsWith('k1:')).toBe(true);
    expect(sealed).not.toContain('secret-token-value');
    expect(c.open(sealed, tokenAad.access('ws_1'))).toBe('act.secret-token-value');
  });

  it('uses a fresh IV each time', () => {
    const c = new TokenCipher('k1', k1);
    expect(c.seal('same', 'aad')).not.toBe(c.seal('same', 'aad'));
  });

  it('reads ciphertexts of a previous key after rotation and marks them stale', () => {
    const before = new TokenCipher('k1', k1);
    const sealed = before.seal('tok', tokenAad.refresh('ws_1'));
    const after = new TokenCipher('k2', k2, new Map([['k1', k1]]));
    expect(after.open(sealed, tokenAad.refresh('ws_1'))).toBe('tok');
    expect(after.isStale(sealed)).toBe(true);
    expect(after.isStale(after.seal('tok', 'x'))).toBe(false);
  });

  describe('bad input', () => {
    const c = new TokenCipher('k1', k1);
    const sealed = c.seal('tok', tokenAad.access('ws_1'));
    const raw = Buffer.from(sealed.slice(3), 'base64');
    const flipped = Buffer.from(raw);
    flipped[flipped.length - 1]! ^= 1;
    it.each([
      ['another row', sealed, tokenAad.access('ws_2')],
      ['another purpose', sealed, tokenAad.refresh('ws_1')],
      ['a tampered ciphertext', `k1:${flipped.toString('base64')}`, tokenAad.access('ws_1')],
      ['an unknown key id', `k9:${raw.toString('base64')}`, tokenAad.access('ws_1')],
      ['no key id', raw.toString('base64'), tokenAad.access('ws_1')],
      ['a truncated value', 'k1:AAAA', tokenAad.access('ws_1')],
      ['an empty string', '', tokenAad.access('ws_1')],
    ])('refuses %s', (_name, value, aad) => {
      expect(() => c.open(value, aad)).toThrow(TokenCipherError);
    });

    it('refuses keys of the wrong size and bad key ids', () => {
      expect(() => new TokenCipher('k1', randomBytes(16))).toThrow(TokenCipherError);
      expect(() => new TokenCipher('k:1', k1)).toThrow(TokenCipherError);
    });
  });
});
