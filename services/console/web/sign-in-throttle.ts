/**
 * Sign-in slowed per account, beside the per-address limit: a guesser that changes address still meets the account's
 * pace. It slows and never locks: after a few free failures an account hears one attempt per spacing, and a browser
 * that signed in to the account before (its device cookie) is never held back, so a stranger's guessing cannot keep
 * the owner out. State is per process (like the per-address limit); a restart forgets it.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { LRUCache } from 'lru-cache';

export interface AccountThrottleLimits {
  /** Failures an account may have before its attempts are spaced. */
  readonly freeFailures: number;
  /** Once past the free failures, at most one attempt per this many ms (for a browser without the device cookie). */
  readonly spacingMs: number;
  /** Failures are forgotten this long after the last one. */
  readonly forgetAfterMs: number;
}

export const SIGN_IN_ACCOUNT_LIMITS: AccountThrottleLimits = { freeFailures: 5, spacingMs: 30_000, forgetAfterMs: 15 * 60_000 };
/** Accounts (known or not) whose failures are remembered; the oldest go first. */
const MAX_TRACKED = 100_000;

interface Failures {
  count: number;
  /** The last failure, or the last attempt admitted while spaced. */
  last: number;
}

export class AccountThrottle {
  private readonly failures = new LRUCache<string, Failures>({ max: MAX_TRACKED });

  constructor(private readonly limits: AccountThrottleLimits = SIGN_IN_ACCOUNT_LIMITS) {}

  /**
   * 0 when an attempt on the account may go now (and it is counted as under way, so attempts sent together are
   * spaced too), else the ms to wait.
   */
  admit(account: string, now = Date.now()): number {
    const f = this.current(account, now);
    if (!f || f.count < this.limits.freeFailures) return 0;
    const wait = f.last + this.limits.spacingMs - now;
    if (wait > 0) return wait;
    f.last = now;
    return 0;
  }

  failed(account: string, now = Date.now()): void {
    const f = this.current(account, now);
    if (f) {
      f.count++;
      f.last = now;
    } else this.failures.set(account, { count: 1, last: now });
  }

  succeeded(account: string): void {
    this.failures.delete(account);
  }

  private current(account: string, now: number): Failures | undefined {
    const f = this.failures.get(account);
    if (f && now - f.last > this.limits.forgetAfterMs) {
      this.failures.delete(account);
      return undefined;
    }
    return f;
  }
}

/**
 * The device cookie: proof that this browser signed in to an account before (an HMAC of the account and a random
 * nonce). It grants nothing but a pass through the account's spacing; the password is still checked.
 */
export class DeviceCookies {
  private readonly key: Buffer;

  constructor(secret: Buffer) {
    this.key = createHmac('sha256', secret).update('console-device-cookie').digest();
  }

  issue(account: string): string {
    const nonce = randomBytes(12).toString('base64url');
    return `${nonce}.${this.mac(account, nonce)}`;
  }

  matches(value: string | undefined, account: string): boolean {
    const [nonce, mac] = (value ?? '').split('.');
    if (!nonce || !mac) return false;
    const expected = Buffer.from(this.mac(account, nonce));
    const given = Buffer.from(mac);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  private mac(account: string, nonce: string): string {
    return createHmac('sha256', this.key).update(`${account}\n${nonce}`).digest('base64url');
  }
}
