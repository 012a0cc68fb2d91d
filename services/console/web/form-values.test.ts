import { describe, expect, it } from 'vitest';
import { unstorableFormValue } from './form-values.js';

describe('unstorableFormValue', () => {
  it.each([
    { body: { name: 'checkout server', mode: 'live' } },
    { body: { name: 'émoji 😀 ✓', id: ['a', 'b'] } },
    { body: { name: '' } },
    { body: undefined },
    { body: null },
  ])('accepts $body', ({ body }) => {
    expect(unstorableFormValue(body)).toBeUndefined();
  });

  describe('bad input', () => {
    it.each([
      { what: 'U+0000 in a value', body: { name: 'a\u0000b' }, says: 'The field "name" holds U+0000 (a null character): text cannot contain U+0000' },
      { what: 'U+0000 in one of repeated values', body: { id: ['ok', '\u0000'] }, says: 'The field "id" holds U+0000' },
      { what: 'U+0000 in a field name', body: { 'na\u0000me': 'x' }, says: 'A field name holds U+0000' },
      { what: 'a lone high surrogate', body: { name: 'x\ud800' }, says: 'The field "name" holds a lone surrogate: text must be valid Unicode' },
      { what: 'a lone low surrogate', body: { name: '\udc00x' }, says: 'holds a lone surrogate' },
      { what: 'surrogates out of order', body: { name: '\ude00\ud83d' }, says: 'holds a lone surrogate' },
      { what: 'a lone surrogate in a field name', body: { '\ud800': 'x' }, says: 'A field name holds a lone surrogate' },
    ])('refuses $what, saying which field and that nothing changed', ({ body, says }) => {
      const problem = unstorableFormValue(body);
      expect(problem).toContain(says);
      expect(problem).toContain('Nothing was changed');
    });
  });
});
