import { describe, expect, it } from 'vitest';
import { clickIdsFromUrl, clickIdsOf } from './click-id.js';

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
    expect(clickIdsFromUrl(url).ttclid).toBe(expected);
  });
});

describe('every click id of the page URL', () => {
  it.each([
    { url: 'https://shop.example/p?fbclid=IwAR1&gclid=Cj0&ttclid=T1', expected: { ttclid: 'T1', fbclid: 'IwAR1', gclid: 'Cj0' } },
    { url: 'https://shop.example/p?gbraid=0AAA&wbraid=CkgI', expected: { gbraid: '0AAA', wbraid: 'CkgI' } },
    { url: 'https://shop.example/p?utm_source=x', expected: {} },
  ])('$url', ({ url, expected }) => {
    expect(clickIdsFromUrl(url)).toEqual(expected);
  });

  describe('bad input', () => {
    it.each([
      { url: 'https://shop.example/p?GCLID=abc&FBCLID=x', why: 'names are case-sensitive' },
      { url: 'https://shop.example/p?gclid=&fbclid=%20', why: 'empty values' },
      { url: `https://shop.example/p?gclid=${'g'.repeat(600)}`, why: 'too long' },
      { url: 'not a url?gclid=abc', why: 'not a URL' },
      { url: undefined, why: 'no URL' },
    ])('$why', ({ url }) => {
      expect(clickIdsFromUrl(url)).toEqual({});
    });
  });
});

describe('the event click ids', () => {
  const session = { page_location: 'https://shop.example/p?ttclid=T1&gclid=G1' };
  it('reads the typed field when the gateway set it, even when empty', () => {
    expect(clickIdsOf({ session, click_ids: { fbclid: 'F' } })).toEqual({ fbclid: 'F' });
    expect(clickIdsOf({ session, click_ids: {} })).toEqual({});
  });
  it('derives them from the page URL for an envelope written before the field existed', () => {
    expect(clickIdsOf({ session })).toEqual({ ttclid: 'T1', gclid: 'G1' });
    expect(clickIdsOf({ session: null })).toEqual({});
  });
});
