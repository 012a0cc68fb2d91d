import { describe, expect, it } from 'vitest';
import { clickIdFromUrl } from './click-id.js';

describe('ttclid from the page URL', () => {
  it.each([
    { url: 'https://shop.example/p?ttclid=E.C.P.abc', expected: 'E.C.P.abc' },
    { url: 'https://shop.example/p?utm_source=tt&ttclid=abc%2Fdef#x', expected: 'abc/def' },
    { url: 'https://shop.example/p?ttclid=', expected: undefined },
    { url: 'https://shop.example/p?TTCLID=abc', expected: undefined },
    { url: 'https://shop.example/p', expected: undefined },
    { url: 'shop.example/p?ttclid=abc', expected: undefined },
    { url: undefined, expected: undefined },
    { url: `https://shop.example/?ttclid=${'a'.repeat(600)}`, expected: undefined },
  ])('$url → $expected', ({ url, expected }) => {
    expect(clickIdFromUrl(url)).toBe(expected);
  });
});
