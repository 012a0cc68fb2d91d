import { describe, expect, it } from 'vitest';
import { webEvent, serverEvent } from '../../../test/helpers/factories.js';
import { checkEventSizes, jsonBytesUpperBound } from './event-size.js';
import { LIMITS } from './limits.js';

const exact = (v: unknown) => Buffer.byteLength(JSON.stringify(v));

describe('jsonBytesUpperBound', () => {
  it.each([
    ['plain event', webEvent()],
    ['server event', serverEvent()],
    ['control characters and quotes', { a: '\u0000\u001f"\\\n', b: ['\t', null, true, false, -1.5e-300, 12345678901234567890] }],
    ['multi-byte and surrogates', { 'ключ': 'значение', emoji: '😀😀', lone: '\ud800x', cjk: '漢字' }],
    ['nested arrays', [[[]], [{}], { x: [1, 2, { y: 'z' }] }]],
  ])('is never below the exact size: %s', (_name, value) => {
    expect(jsonBytesUpperBound(value, Infinity)).toBeGreaterThanOrEqual(exact(value));
  });

  it('gives up (Infinity) once past the budget', () => {
    expect(jsonBytesUpperBound({ a: 'x'.repeat(100) }, 50)).toBe(Infinity);
  });
});

describe('checkEventSizes', () => {
  it('refuses an event over the limit, naming its index, and passes events under it', () => {
    const big = webEvent({ event_data: { note: 'x'.repeat(LIMITS.maxEventBytes) } });
    const events = [webEvent(), big];
    expect(() => checkEventSizes(events, String(exact(events)))).toThrow(/^\[1\] is \d+ bytes/);
    // An event whose bound passes the limit but whose exact size does not is accepted.
    const escaped = webEvent({ event_data: { note: 'é'.repeat(Math.floor(LIMITS.maxEventBytes / 4)) } });
    expect(jsonBytesUpperBound(escaped, Infinity)).toBeGreaterThan(LIMITS.maxEventBytes);
    expect(() => checkEventSizes([escaped], String(exact([escaped])))).not.toThrow();
  });
});
