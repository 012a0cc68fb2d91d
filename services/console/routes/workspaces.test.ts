/** Admin API: the workspace list, API key metadata (name, created, last used) and console members. */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { FLUSH_EVERY_MS } from '../../gateway/auth/usage.js';
import { webEvent } from '../../../test/helpers/factories.js';
import { buildTestApp, ADMIN, type TestApp } from '../../../test/helpers/in-process.js';

const auth = { authorization: `Bearer ${ADMIN}` };
let t: TestApp;

beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(async () => t?.close());

const call = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) =>
  t.app.inject({ method, url, headers: auth, ...(payload ? { payload } : {}) });

describe('GET /admin/v1/workspaces', () => {
  it('lists workspaces oldest first, in pages', async () => {
    const made = [];
    for (const name of ['list-a', 'list-b', 'list-c']) made.push((await call('POST', '/admin/v1/workspaces', { name })).json().id);
    const all = await call('GET', '/admin/v1/workspaces?limit=500');
    expect(all.statusCode).toBe(200);
    const ids = all.json().items.map((w: { id: string }) => w.id);
    expect(ids.slice(-3)).toEqual(made);
    expect(all.json().items.at(-1)).toMatchObject({ name: 'list-c', plan: 'free', created_at: expect.any(String) });

    const first = await call('GET', `/admin/v1/workspaces?limit=2&after=${made[0]}`);
    expect(first.json().items.map((w: { id: string }) => w.id)).toEqual(made.slice(1));
    expect(first.json().next).toBe(made[2]);
    expect((await t.app.inject({ method: 'GET', url: '/admin/v1/workspaces' })).statusCode).toBe(401);
  });
});

describe('workspace names', () => {
  it.each([' ', '   ', '\t\n'])('a name of only white space (%j) is refused with 400, on create and on rename', async (name) => {
    const created = await call('POST', '/admin/v1/workspaces', { name });
    expect(created.statusCode).toBe(400);
    expect(created.json().detail).toContain('name');
    const ws = (await call('POST', '/admin/v1/workspaces', { name: 'renamed' })).json().id;
    const renamed = await t.app.inject({ method: 'PATCH', url: `/admin/v1/workspaces/${ws}`, headers: auth, payload: { name } });
    expect(renamed.statusCode).toBe(400);
  });
});

describe('API keys', () => {
  it('carry a name, a creation time and a last-used time updated by use', async () => {
    const ws = (await call('POST', '/admin/v1/workspaces', { name: 'keys', plan: 'enterprise' })).json().id;
    const created = await call('POST', `/admin/v1/workspaces/${ws}/api-keys`, { mode: 'live', name: 'checkout server' });
    expect(created.statusCode).toBe(201);
    expect(created.json()).toMatchObject({ name: 'checkout server', mode: 'live', created_at: expect.any(String) });
    const before = (await call('GET', `/admin/v1/workspaces/${ws}/api-keys`)).json().keys[0];
    expect(before).toMatchObject({ name: 'checkout server', last_used_at: null, revoked: false, revoked_at: null });

    const sent = await t.app.inject({
      method: 'POST',
      url: '/v1/events',
      headers: { authorization: `Bearer ${created.json().key}` },
      payload: [webEvent({ event_name: 'purchase' })],
    });
    expect(sent.statusCode, sent.body).toBe(202);
    // Usage is flushed in batches every FLUSH_EVERY_MS, never per request: wait until the flush shows.
    const after = await vi.waitFor(
      async () => {
        const key = (await call('GET', `/admin/v1/workspaces/${ws}/api-keys`)).json().keys[0];
        expect(key.last_used_at).not.toBeNull();
        return key;
      },
      { timeout: FLUSH_EVERY_MS + 10_000, interval: 50 },
    );
    expect(Date.parse(after.last_used_at)).toBeGreaterThanOrEqual(Date.parse(before.created_at) - 1000);
    const names = async () =>
      (await t.db.query<{ name: string; count: unknown }>('SELECT name, count FROM workspace_event_names WHERE workspace_id = $1', [ws])).rows.map((r) => [r.name, Number(r.count)]);
    await vi.waitFor(async () => expect(await names()).toEqual([['purchase', 1]]), { timeout: FLUSH_EVERY_MS + 10_000, interval: 50 });
  });
});

describe('POST /admin/v1/workspaces/{ws}/members', () => {
  it('creates a console user with a role, lists them, and audits it', async () => {
    const ws = (await call('POST', '/admin/v1/workspaces', { name: 'people' })).json().id;
    const r = await call('POST', `/admin/v1/workspaces/${ws}/members`, { email: 'Ana@Example.com', password: 'correct horse battery', role: 'owner' });
    expect(r.statusCode).toBe(201);
    expect(r.json()).toEqual({ id: expect.stringMatching(/^usr_/), email: 'ana@example.com', role: 'owner' });
    const list = await call('GET', `/admin/v1/workspaces/${ws}/members`);
    expect(list.json().items).toEqual([{ id: r.json().id, email: 'ana@example.com', role: 'owner', created_at: expect.any(String) }]);
    const stored = await t.db.query<{ password_hash: string }>('SELECT password_hash FROM console_users WHERE id = $1', [r.json().id]);
    expect(stored.rows[0]!.password_hash).toMatch(/^sha256\+\$2[aby]\$/);
    expect(stored.rows[0]!.password_hash).not.toContain('correct horse');
    const audit = await t.db.query<{ action: string; actor: string }>('SELECT action, actor FROM audit_log WHERE workspace_id = $1 ORDER BY id', [ws]);
    expect(audit.rows.map((a) => a.action)).toContain('member.added');
  });

  it('adds an existing user to a second workspace with the same answer whatever password is given (no password oracle)', async () => {
    const a = (await call('POST', '/admin/v1/workspaces', { name: 'first' })).json().id;
    const b = (await call('POST', '/admin/v1/workspaces', { name: 'second' })).json().id;
    const c = (await call('POST', '/admin/v1/workspaces', { name: 'third' })).json().id;
    const first = await call('POST', `/admin/v1/workspaces/${a}/members`, { email: 'bo@example.com', password: 'bo-password-1', role: 'owner' });
    const other = await call('POST', `/admin/v1/workspaces/${b}/members`, { email: 'bo@example.com', password: 'another-password', role: 'member' });
    const same = await call('POST', `/admin/v1/workspaces/${c}/members`, { email: 'bo@example.com', password: 'bo-password-1', role: 'member' });
    for (const r of [other, same]) {
      expect(r.statusCode).toBe(201);
      expect(r.json()).toEqual({ id: first.json().id, email: 'bo@example.com', role: 'member' });
    }
    expect(other.headers['content-length']).toBe(same.headers['content-length']);
    // Their own password is kept: the one given for an existing user is not used.
    const { UserRepo } = await import('../user-repo.js');
    const users = new UserRepo(t.db);
    expect(await users.authenticate('bo@example.com', 'bo-password-1')).toMatchObject({ id: first.json().id });
    expect(await users.authenticate('bo@example.com', 'another-password')).toBeUndefined();
    expect((await users.memberships(first.json().id)).map((m) => m.role).sort()).toEqual(['member', 'member', 'owner']);
  });

  describe('bad input', () => {
    it.each([
      { name: 'role unknown, listing the roles', body: { email: 'c@example.com', password: 'long enough pw', role: 'admin' }, detail: 'role must be one of owner, member' },
      { name: 'email malformed', body: { email: 'not-an-email', password: 'long enough pw', role: 'owner' }, detail: 'email' },
      { name: 'password too short', body: { email: 'c@example.com', password: 'short', role: 'owner' }, detail: 'at least 10 characters' },
      { name: 'password past 1024 characters', body: { email: 'c@example.com', password: 'x'.repeat(1025), role: 'owner' }, detail: 'password must be at most 1024 characters' },
      { name: 'email missing', body: { password: 'long enough pw', role: 'owner' }, detail: 'email is required' },
    ])('$name: 400 naming the problem', async ({ body, detail }) => {
      const ws = (await call('POST', '/admin/v1/workspaces', { name: 'bad' })).json().id;
      const r = await call('POST', `/admin/v1/workspaces/${ws}/members`, body);
      expect(r.statusCode).toBe(400);
      expect(r.headers['content-type']).toContain('application/problem+json');
      expect(r.json().detail).toContain(detail);
    });

    it('an unknown workspace is a 404', async () => {
      const r = await call('POST', '/admin/v1/workspaces/ws_nope/members', { email: 'd@example.com', password: 'long enough pw', role: 'owner' });
      expect(r.statusCode).toBe(404);
    });

    it('a key mode outside live/test lists both', async () => {
      const ws = (await call('POST', '/admin/v1/workspaces', { name: 'mode' })).json().id;
      const r = await call('POST', `/admin/v1/workspaces/${ws}/api-keys`, { mode: 'prod' });
      expect(r.json().detail).toBe('mode must be one of live, test');
    });
  });
});
