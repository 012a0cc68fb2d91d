/**
 * Normalisation and hashing of personal identifiers, as the service requires them (docs/identifiers.md; the test
 * vectors in clients/vectors/identifiers.json are the single source of the rules):
 *  - email: Unicode NFC, trim, lower-case; then SHA-256 hex.
 *  - phone: E.164 (`+` country code and national number), parsed with libphonenumber-js's full metadata so that
 *    national numbers take the default country and impossible numbers are refused; then SHA-256 hex.
 * Every function throws InvalidIdentifierError on input that cannot be normalised: a wrong hash is worse than none.
 */
import { createHash } from 'node:crypto';
import { parsePhoneNumberWithError, ParseError, type CountryCode } from 'libphonenumber-js/max';

export class InvalidIdentifierError extends Error {
  override readonly name = 'InvalidIdentifierError';
  constructor(
    readonly kind: 'email' | 'phone',
    readonly reason: string,
  ) {
    super(`cannot normalise ${kind}: ${reason}`);
  }
}

const sha256Hex = (s: string): string => createHash('sha256').update(s, 'utf8').digest('hex');

const MAX_EMAIL_LENGTH = 254;

/** `"  Jane.Doe@Example.COM "` → `"jane.doe@example.com"`. Plus addressing and dots are kept (the platform's rule). */
export function normalizeEmail(input: string): string {
  if (typeof input !== 'string') throw new InvalidIdentifierError('email', 'not a string');
  const email = input.normalize('NFC').trim().toLowerCase();
  if (email === '') throw new InvalidIdentifierError('email', 'empty');
  if (email.length > MAX_EMAIL_LENGTH) throw new InvalidIdentifierError('email', `longer than ${MAX_EMAIL_LENGTH} characters`);
  if (/\s/u.test(email)) throw new InvalidIdentifierError('email', 'contains whitespace');
  const at = email.indexOf('@');
  if (at < 0 || email.indexOf('@', at + 1) >= 0) throw new InvalidIdentifierError('email', 'needs exactly one @');
  const local = email.slice(0, at);
  const domain = email.slice(at + 1);
  if (local === '') throw new InvalidIdentifierError('email', 'nothing before the @');
  if (!/^[^.]+(\.[^.]+)+$/u.test(domain)) throw new InvalidIdentifierError('email', `"${domain}" is not a domain name`);
  return email;
}

/**
 * `"020 7946 0018", "GB"` → `"+442079460018"`. Accepts punctuation, spaces, full-width digits, a `+` or `00`
 * international prefix; a national number needs `defaultCountry` (ISO 3166-1 alpha-2). Refuses numbers that are
 * not valid for their country and numbers with an extension (E.164 has none).
 */
export function normalizePhone(input: string, defaultCountry?: string): string {
  if (typeof input !== 'string') throw new InvalidIdentifierError('phone', 'not a string');
  // NFKC folds full-width digits and plus signs (`＋４４`) into ASCII.
  const text = input.normalize('NFKC').trim();
  if (text === '') throw new InvalidIdentifierError('phone', 'empty');
  const country = defaultCountry?.trim().toUpperCase();
  if (country !== undefined && !/^[A-Z]{2}$/.test(country)) {
    throw new InvalidIdentifierError('phone', `default country "${defaultCountry}" is not an ISO 3166-1 alpha-2 code`);
  }
  let parsed;
  try {
    parsed = parsePhoneNumberWithError(text, { defaultCountry: country as CountryCode | undefined, extract: false });
  } catch (err) {
    const code = err instanceof ParseError ? err.message : String(err);
    throw new InvalidIdentifierError('phone', PARSE_ERRORS[code] ?? code);
  }
  if (parsed.ext) throw new InvalidIdentifierError('phone', 'has an extension, which E.164 cannot carry');
  if (!parsed.isValid()) throw new InvalidIdentifierError('phone', `${parsed.number} is not a valid number`);
  return parsed.number;
}

const PARSE_ERRORS: Record<string, string> = {
  INVALID_COUNTRY: 'unknown country calling code, or a national number without a default country',
  NOT_A_NUMBER: 'not a phone number',
  TOO_SHORT: 'too short',
  TOO_LONG: 'too long',
  INVALID_LENGTH: 'invalid length',
};

/** SHA-256 hex of normalizeEmail(input). */
export function hashEmail(input: string): string {
  return sha256Hex(normalizeEmail(input));
}

/** SHA-256 hex of normalizePhone(input) in E.164 form, with the leading `+`. */
export function hashPhone(input: string, defaultCountry?: string): string {
  return sha256Hex(normalizePhone(input, defaultCountry));
}

/**
 * The identifiers endpoint A takes, from plain values: `email` {sha256_email}, `phone` {sha256_e164 (with the `+`),
 * sha256_e164_numeric (without it)}, as the spec's hashing rules ask. Throws like the functions above.
 */
export function hashedIdentifiers(plain: { email?: string; phone?: string; defaultCountry?: string }): {
  email?: { sha256_email: string };
  phone?: { sha256_e164: string; sha256_e164_numeric: string };
} {
  const out: ReturnType<typeof hashedIdentifiers> = {};
  if (plain.email !== undefined) out.email = { sha256_email: hashEmail(plain.email) };
  if (plain.phone !== undefined) {
    const e164 = normalizePhone(plain.phone, plain.defaultCountry);
    out.phone = { sha256_e164: sha256Hex(e164), sha256_e164_numeric: sha256Hex(e164.slice(1)) };
  }
  return out;
}
