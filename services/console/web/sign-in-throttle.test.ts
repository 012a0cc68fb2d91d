/** The per-account pace of sign-in attempts, on a clock of its own. */
import { describe, expect, it } from 'vitest';
import { AccountThrottle, DeviceCookies } from './sign-in-throttle.js';

const limits = { freeFailures: 3, spacingMs: 30_000, forgetAfterMs: 15 * 60_000 };

describe('AccountThrottle', () => {
  it('lets the free failures through, then one attempt per spacing; a success forgets the account', () => {
    const t = new AccountThrottle(limits);
    for (let i = 0; i < 3; i++) {
      expect(t.admit('a', 1000 + i)).toBe(0);
      t.failed('a', 1000 + i);
    }
    expect(t.admit('a', 1003)).toBe(30_000 - 1);
    expect(t.admit('a', 1002 + 30_000)).toBe(0);
    // That attempt is under way: a second sent with it waits a whole spacing.
    expect(t.admit('a', 1002 + 30_000)).toBe(30_000);
    expect(t.admit('b', 1003)).toBe(0);
    t.succeeded('a');
    expect(t.admit('a', 1002 + 30_001)).toBe(0);
  });

  it('forgets failures a while after the last one', () => {
    const t = new AccountThrottle(limits);
    for (let i = 0; i < 5; i++) t.failed('a', 0);
    expect(t.admit('a', 1)).toBeGreaterThan(0);
    expect(t.admit('a', 15 * 60_000 + 1)).toBe(0);
  });
});

describe('DeviceCookies', () => {
  const cookies = new DeviceCookies(Buffer.alloc(32, 1));
  it('a cookie issued for an account matches that account only', () => {
    const c = cookies.issue('ana@example.com');
    expect(cookies.matches(c, 'ana@example.com')).toBe(true);
    expect(cookies.matches(c, 'bo@example.com')).toBe(false);
    expect(new DeviceCookies(Buffer.alloc(32, 2)).matches(c, 'ana@example.com')).toBe(false);
  });

  describe('bad input', () => {
    const good = cookies.issue('ana@example.com');
    it.each([undefined, '', '.', 'abc', `${good}x`, `x${good}`, good.split('.')[0], `.${good.split('.')[1]}`, 'é.é'])('%j does not match', (value) => {
      expect(cookies.matches(value, 'ana@example.com')).toBe(false);
    });
  });
});
