/**
 * The console's sign-in and session, in-process (app.inject): per-account slowing beside the per-address limit, the
 * device cookie that keeps the owner in, bcrypt's 72-byte limit, the absolute session lifetime and sign-out.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN, buildTestApp, type TestApp } from '../../../test/helpers/in-process.js';
import { SESSION_ABSOLUTE_MS } from './plugin.js';
import { SIGN_IN_ACCOUNT_LIMITS } from './sign-in-throttle.js';

let t: TestApp;
let ws: string;

/** A browser over app.inject: one address, a cookie jar, no redirects followed. */
function browser(remoteAddress = '127.0.0.1') {
  const jar = new Map<string, string>();
  const send = async (method: 'GET' | 'POST', url: string, form?: Record<string, string>) => {
    const r = await t.app.inject({
      method,
      url,
      remoteAddress,
      headers: {
        ...(jar.size ? { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') } : {}),
        ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
      ...(form ? { payload: new URLSearchParams(form).toString() } : {}),
    });
    for (const c of r.cookies as Array<{ name: string; value: string; maxAge?: number; expires?: Date }>) {
      const gone = c.value === '' || c.maxAge === 0 || (c.expires !== undefined && c.expires.getTime() <= Date.now());
      if (gone) jar.delete(c.name);
      else jar.set(c.name, c.value);
    }
    return r;
  };
  const csrf = async (page = '/console') => /name="_csrf" value="([^"]+)"/.exec((await send('GET', page)).body)![1]!;
  return {
    jar,
    send,
    async signIn(email: string, password: string) {
      return send('POST', '/console/sign-in', { email, password, _csrf: await csrf() });
    },
    async signOut() {
      return send('POST', '/console/sign-out', { _csrf: await csrf('/console/workspaces') });
    },
  };
}

const addMember = (email: string, password: string) =>
  t.app.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws}/members`, headers: { authorization: `Bearer ${ADMIN}` }, payload: { email, password, role: 'owner' } });

let addresses = 0;
/** A new source address each call: a guesser rotating addresses never meets the per-address limit. */
const freshAddress = () => `10.0.${Math.floor(++addresses / 250)}.${addresses % 250}`;

beforeAll(async () => {
  t = await buildTestApp({}, { console: true });
  ws = (await t.app.inject({ method: 'POST', url: '/admin/v1/workspaces', headers: { authorization: `Bearer ${ADMIN}` }, payload: { name: 'signin' } })).json().id;
});
afterAll(async () => t?.close());

describe('sign-in throttled per account', () => {
  it('a guesser changing address is slowed on the account; the owner\'s browser that signed in before is not', async () => {
    const email = 'owner@throttle.example';
    const password = 'the owner password';
    expect((await addMember(email, password)).statusCode).toBe(201);
    const owner = browser('192.0.2.1');
    expect((await owner.signIn(email, password)).statusCode).toBe(303);
    expect(owner.jar.has('console_device')).toBe(true);
    await owner.signOut();

    const answers: number[] = [];
    for (let i = 0; i < SIGN_IN_ACCOUNT_LIMITS.freeFailures + 3; i++) answers.push((await browser(freshAddress()).signIn(email, `guess number ${i}`)).statusCode);
    expect(answers.slice(0, SIGN_IN_ACCOUNT_LIMITS.freeFailures)).toEqual(Array(SIGN_IN_ACCOUNT_LIMITS.freeFailures).fill(401));
    // Past the free failures the account hears one attempt per spacing after the last failure: these come too soon.
    expect(answers.slice(SIGN_IN_ACCOUNT_LIMITS.freeFailures)).toEqual([429, 429, 429]);

    const held = await browser(freshAddress()).signIn(email, password);
    expect(held.statusCode).toBe(429);
    expect(Number(held.headers['retry-after'])).toBeGreaterThan(0);
    expect(held.body).toContain('Too many sign-in attempts to this account failed');

    // The owner's browser still gets in at once, with the right password only.
    expect((await owner.signIn(email, 'a wrong guess')).statusCode).toBe(401);
    expect((await owner.signIn(email, password)).statusCode).toBe(303);
  });

  it('an email that is no account is slowed exactly like one that is (no account oracle)', async () => {
    const answers = async (email: string) => {
      const out: number[] = [];
      for (let i = 0; i < SIGN_IN_ACCOUNT_LIMITS.freeFailures + 2; i++) out.push((await browser(freshAddress()).signIn(email, `guess number ${i}`)).statusCode);
      return out;
    };
    expect((await addMember('real@throttle.example', 'real password 1')).statusCode).toBe(201);
    expect(await answers('nobody@throttle.example')).toEqual(await answers('real@throttle.example'));
  });

  describe('bad input', () => {
    it.each([
      { name: 'another case and spaces of the same email', email: '  OWNER2@Throttle.Example ' },
      { name: 'the same email', email: 'owner2@throttle.example' },
    ])('$name counts against the same account', async ({ email }) => {
      const base = 'owner2@throttle.example';
      for (let i = 0; i <= SIGN_IN_ACCOUNT_LIMITS.freeFailures; i++) await browser(freshAddress()).signIn(base, `guess ${i}`);
      expect((await browser(freshAddress()).signIn(email, 'one more guess')).statusCode).toBe(429);
    });
  });
});

describe('passwords and bcrypt\'s 72 bytes', () => {
  const long = 'p'.repeat(72);
  it.each([
    { name: 'a password longer than 72 bytes is stored whole: its first 72 bytes alone do not sign in', password: `${long}-tail`, wrong: long },
    { name: 'nor does it with another tail', password: `${long}-tail`, wrong: `${long}-other` },
    { name: 'multi-byte characters past byte 72 count', password: `${'é'.repeat(36)}ab`, wrong: `${'é'.repeat(36)}ac` },
  ])('$name', async ({ password, wrong }) => {
    const email = `long${Math.random().toString(36).slice(2)}@bcrypt.example`;
    expect((await addMember(email, password)).statusCode).toBe(201);
    expect((await browser(freshAddress()).signIn(email, wrong)).statusCode).toBe(401);
    expect((await browser(freshAddress()).signIn(email, password)).statusCode).toBe(303);
  });

  it('a hash made before pre-hashing still signs in (and is upgraded), and refuses what follows its 72 bytes', async () => {
    const bcrypt = (await import('bcryptjs')).default;
    const email = 'legacy@bcrypt.example';
    expect((await addMember(email, 'placeholder password')).statusCode).toBe(201);
    await t.db.query('UPDATE console_users SET password_hash = $2 WHERE email = $1', [email, bcrypt.hashSync(long, 4)]);
    expect((await browser(freshAddress()).signIn(email, `${long}anything`)).statusCode).toBe(401);
    expect((await browser(freshAddress()).signIn(email, long)).statusCode).toBe(303);
    const stored = await t.db.query<{ password_hash: string }>('SELECT password_hash FROM console_users WHERE email = $1', [email]);
    expect(stored.rows[0]!.password_hash).toMatch(/^sha256\+\$2[aby]\$/);
    expect((await browser(freshAddress()).signIn(email, long)).statusCode).toBe(303);
  });
});

describe('console sessions', () => {
  it('end at their absolute lifetime however active they were', async () => {
    const email = 'session@life.example';
    expect((await addMember(email, 'session password')).statusCode).toBe(201);
    const b = browser(freshAddress());
    expect((await b.signIn(email, 'session password')).statusCode).toBe(303);
    expect((await b.send('GET', '/console/workspaces')).statusCode).toBe(200);
    // Signed in SESSION_ABSOLUTE_MS ago (a minute more), active to this moment.
    await t.db.query(`UPDATE console_sessions SET data = jsonb_set(data, '{signedInAt}', to_jsonb($1::bigint)) WHERE data->'user'->>'email' = $2`, [
      Date.now() - SESSION_ABSOLUTE_MS - 60_000,
      email,
    ]);
    const after = await b.send('GET', '/console/workspaces');
    expect(after.statusCode).toBe(303);
    expect(after.headers.location).toBe('/console');
    const left = await t.db.query(`SELECT 1 FROM console_sessions WHERE data->'user'->>'email' = $1`, [email]);
    expect(left.rows).toEqual([]);
  });

  it('sign-out ends the session on the server and clears the cookie in the browser', async () => {
    const email = 'signout@life.example';
    expect((await addMember(email, 'signout password')).statusCode).toBe(201);
    const b = browser(freshAddress());
    expect((await b.signIn(email, 'signout password')).statusCode).toBe(303);
    const cookie = b.jar.get('console_session')!;
    const out = await b.signOut();
    expect(out.statusCode).toBe(303);
    const cleared = (out.cookies as Array<{ name: string; value: string; expires?: Date; maxAge?: number }>).find((c) => c.name === 'console_session');
    expect(cleared, String(out.headers['set-cookie'])).toBeDefined();
    expect(cleared!.value === '' || cleared!.maxAge === 0 || cleared!.expires!.getTime() <= Date.now()).toBe(true);
    expect(b.jar.has('console_session')).toBe(false);
    // The old cookie, replayed, is signed out.
    const replay = await t.app.inject({ method: 'GET', url: '/console/workspaces', headers: { cookie: `console_session=${cookie}` } });
    expect(replay.statusCode).toBe(303);
  });
});
