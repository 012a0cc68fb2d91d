/**
 * The suite runs on the Node that package.json's `engines` asks for: `make` puts Node 24 first on PATH when the
 * machine's is older (infra/local/node.sh), and every spawned service inherits it. Run on an older Node by hand
 * (`npx vitest` outside make), this fails first instead of letting other tests fail in puzzling ways.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/** [major, minor, patch] of "v24.21.0", "24.11" or ">=24.11". */
function parts(version: string): [number, number, number] {
  const m = /^(?:>=\s*)?v?(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(version.trim());
  if (!m) throw new Error(`not a version or a >= floor: ${version}`);
  return [Number(m[1]), Number(m[2] ?? 0), Number(m[3] ?? 0)];
}

const atLeast = (version: string, floor: string): boolean => {
  const [a, b] = [parts(version), parts(floor)];
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i]! > b[i]!;
  return true;
};

describe('the runtime', () => {
  it('is at least the engines floor, and an LTS line of 24 or later', () => {
    const floor = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { engines: { node: string } }).engines.node;
    expect(atLeast(process.version, floor), `node ${process.version} is older than engines ${floor}`).toBe(true);
    expect(parts(process.version)[0]).toBeGreaterThanOrEqual(24);
  });

  it.each([
    ['v24.21.0', '>=24.11', true],
    ['v24.11.0', '>=24.11', true],
    ['v24.10.9', '>=24.11', false],
    ['v20.20.2', '>=24.11', false],
    ['v26.0.0', '>=24.11', true],
  ])('%s against %s: %s', (version, floor, expected) => {
    expect(atLeast(version, floor)).toBe(expected);
  });

  describe('bad input', () => {
    it.each(['', 'latest', '^24', '24.x', '>=24 <26'])('refuses %j as a version or floor', (text) => {
      expect(() => parts(text)).toThrow(/not a version/);
    });
  });
});
