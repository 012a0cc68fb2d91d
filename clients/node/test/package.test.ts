/**
 * The package as a user installs it: the built entry point exports the contract's functions and the client, and
 * its wire types are generated from the service's current OpenAPI document (`npm run generate` after a route change).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const PKG = join(import.meta.dirname, '..');

describe('clients/node as a package', () => {
  it('dist/index.js exports normalizeEmail, normalizePhone, hashEmail, hashPhone and the client', async () => {
    const mod = await import(join(PKG, 'dist', 'index.js'));
    for (const name of ['normalizeEmail', 'normalizePhone', 'hashEmail', 'hashPhone', 'createClient']) {
      expect(typeof mod[name], name).toBe('function');
    }
    expect(mod.hashEmail(' Jane@Example.com ')).toBe('8c87b489ce35cf2e2f39f80e282cb2e804932a56a213983eeeb428407d43b52d');
    expect(mod.normalizePhone('020 7946 0018', 'GB')).toBe('+442079460018');
    const pkg = JSON.parse(readFileSync(join(PKG, 'package.json'), 'utf8'));
    expect(pkg.exports['.'].default).toBe('./dist/index.js');
  });

  it('its types are generated from the current docs/openapi.json', () => {
    const out = join(mkdtempSync(join(tmpdir(), 'sdk-types-')), 'openapi.ts');
    const r = spawnSync(
      join(PKG, 'node_modules', '.bin', 'openapi-typescript'),
      [join(PKG, '..', '..', 'docs', 'openapi.json'), '--empty-objects-unknown', '-o', out],
      { encoding: 'utf8' },
    );
    expect(r.status, r.stderr).toBe(0);
    const committed = readFileSync(join(PKG, 'src', 'generated', 'openapi.ts'), 'utf8');
    expect(readFileSync(out, 'utf8'), 'stale: run `npm run generate` in clients/node').toBe(committed);
  });
});
