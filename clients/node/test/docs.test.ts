/** docs/identifiers.md shows the vectors: its tables must say exactly what clients/vectors/identifiers.json says. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { vectors } from './vectors.js';

const doc = readFileSync(join(import.meta.dirname, '..', '..', '..', 'docs', 'identifiers.md'), 'utf8');
const cell = (s: string) => s.trim().replace(/^`|`$/g, '');
const rows = doc
  .split('\n')
  .filter((l) => l.startsWith('| `"'))
  .map((l) => l.slice(1, -1).split(' | ').map(cell));

describe('docs/identifiers.md', () => {
  it('lists every email vector, as the vectors say', () => {
    const emails = rows.filter((r) => r.length === 3);
    expect(emails.map(([input, normalized, sha]) => ({ input: JSON.parse(input!), normalized, sha })))
      .toEqual(vectors.email.map((v) => ({ input: v.input, normalized: v.error ? 'refused' : v.normalized, sha: v.sha256 ?? '' })));
  });

  it('lists every phone vector, as the vectors say', () => {
    const phones = rows.filter((r) => r.length === 5);
    expect(phones.map(([input, country, e164, a, b]) => ({ input: JSON.parse(input!), country, e164, a, b }))).toEqual(
      vectors.phone.map((v) => ({
        input: v.input,
        country: v.default_country ?? 'none',
        e164: v.error ? 'refused' : v.e164,
        a: v.sha256_e164 ?? '',
        b: v.sha256_e164_numeric ?? '',
      })),
    );
  });

  it("the code example's digest is the vector's", () => {
    const example = vectors.email.find((v) => v.input === '  Jane.Doe@Example.COM \n')!;
    expect(doc).toContain(`hashEmail('  Jane.Doe@Example.COM ');          // '${example.sha256!.slice(0, 8)}…'`);
  });
});
