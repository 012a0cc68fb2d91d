/** normalizeEmail / normalizePhone / hashEmail / hashPhone against the shared vectors, the one source of the rules. */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { hashEmail, hashPhone, hashedIdentifiers, InvalidIdentifierError, normalizeEmail, normalizePhone } from '../src/index.js';
import { vectors } from './vectors.js';

const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const valid = <T extends { error?: true }>(list: T[]) => list.filter((v) => !v.error).map((v) => [v.name, v] as const);
const invalid = <T extends { error?: true }>(list: T[]) => list.filter((v) => v.error).map((v) => [v.name, v] as const);

describe('the vectors file', () => {
  it('covers what the rules promise, and its hashes are the SHA-256 of its normalised values', () => {
    expect(valid(vectors.email).length).toBeGreaterThanOrEqual(5);
    expect(invalid(vectors.email).length).toBeGreaterThanOrEqual(5);
    expect(invalid(vectors.phone).length).toBeGreaterThanOrEqual(5);
    for (const v of vectors.email) if (!v.error) expect(v.sha256).toBe(sha(v.normalized!));
    for (const v of vectors.phone) {
      if (v.error) continue;
      expect(v.sha256_e164).toBe(sha(v.e164!));
      expect(v.sha256_e164_numeric).toBe(sha(v.e164!.slice(1)));
    }
  });
});

describe('email', () => {
  it.each(valid(vectors.email))('%s', (_name, v) => {
    expect(normalizeEmail(v.input)).toBe(v.normalized);
    expect(hashEmail(v.input)).toBe(v.sha256);
  });
});

describe('phone', () => {
  it.each(valid(vectors.phone))('%s', (_name, v) => {
    const country = v.default_country ?? undefined;
    expect(normalizePhone(v.input, country)).toBe(v.e164);
    expect(hashPhone(v.input, country)).toBe(v.sha256_e164);
    expect(hashedIdentifiers({ phone: v.input, defaultCountry: country }).phone).toEqual({
      sha256_e164: v.sha256_e164,
      sha256_e164_numeric: v.sha256_e164_numeric,
    });
  });
});

describe('bad input', () => {
  it.each(invalid(vectors.email))('email: %s is refused', (_name, v) => {
    expect(() => normalizeEmail(v.input)).toThrow(InvalidIdentifierError);
    expect(() => hashEmail(v.input)).toThrow(/^cannot normalise email: /);
  });

  it.each(invalid(vectors.phone))('phone: %s is refused', (_name, v) => {
    expect(() => normalizePhone(v.input, v.default_country ?? undefined)).toThrow(InvalidIdentifierError);
    expect(() => hashPhone(v.input, v.default_country ?? undefined)).toThrow(/^cannot normalise phone: /);
  });

  it.each([
    ['a number', 42],
    ['null', null],
    ['an object', { email: 'jane@example.com' }],
  ])('%s instead of a string is refused', (_name, value) => {
    expect(() => hashEmail(value as never)).toThrow(/not a string/);
    expect(() => hashPhone(value as never, 'US')).toThrow(/not a string/);
  });

  it.each(['USA', 'u', '12'])('a default country that is not ISO 3166-1 alpha-2 (%s) is refused', (country) => {
    expect(() => normalizePhone('650 253 0000', country)).toThrow(/not an ISO 3166-1 alpha-2 code/);
  });

  it('a lower-case country code is accepted', () => {
    expect(normalizePhone('650 253 0000', 'us')).toBe('+16502530000');
  });

  it('hashedIdentifiers refuses like the functions it uses', () => {
    expect(() => hashedIdentifiers({ email: 'jane@' })).toThrow(InvalidIdentifierError);
  });
});
