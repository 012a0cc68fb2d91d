/** The shared normalisation vectors (clients/vectors/identifiers.json), typed. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface EmailVector {
  name: string;
  input: string;
  normalized?: string;
  sha256?: string;
  error?: true;
  sandbox?: false;
  why?: string;
}
export interface PhoneVector {
  name: string;
  input: string;
  default_country: string | null;
  e164?: string;
  sha256_e164?: string;
  sha256_e164_numeric?: string;
  error?: true;
  sandbox?: false;
  why?: string;
}

export const VECTORS_PATH = join(import.meta.dirname, '..', '..', 'vectors', 'identifiers.json');
export const vectors: { email: EmailVector[]; phone: PhoneVector[] } = JSON.parse(readFileSync(VECTORS_PATH, 'utf8'));

/** The country calling code of an ISO 3166-1 alpha-2 country (`GB` → `44`), for the tag's parameter. */
export { getCountryCallingCode as callingCodeOf } from 'libphonenumber-js/max';
