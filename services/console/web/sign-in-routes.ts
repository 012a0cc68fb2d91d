/** Console: sign in, sign out, and the workspace list / create page. */
import type { FastifyInstance } from 'fastify';
import { grantRole, MAX_PASSWORD_LENGTH, UserRepo } from '../user-repo.js';
import { WorkspaceRepo } from '../workspace-repo.js';
import type { ConsoleWebDeps } from './deps.js';
import { renderPage, SESSION_COOKIE } from './page.js';
import { AccountThrottle, DeviceCookies } from './sign-in-throttle.js';

const DEVICE_COOKIE = 'console_device';
const DEVICE_COOKIE_MAX_AGE_S = 90 * 86_400;

const signInBody = {
  type: 'object',
  required: ['email', 'password'],
  properties: { email: { type: 'string', maxLength: 254 }, password: { type: 'string', maxLength: MAX_PASSWORD_LENGTH }, _csrf: { type: 'string' } },
} as const;

/** The actor written to the audit log for a console user. */
export const actorOf = (user: { email: string }): string => `console:${user.email}`;

export function signInRoutes(app: FastifyInstance, deps: ConsoleWebDeps): void {
  const users = new UserRepo(deps.db);
  const throttle = new AccountThrottle(deps.signInAccountLimits);
  const devices = new DeviceCookies(deps.secretKey);
  const https = deps.publicBaseUrl.startsWith('https:');

  app.get('/', async (request, reply) => {
    if (request.session.user) return reply.redirect('/console/workspaces', 303);
    return renderPage(request, reply, 'sign-in', { title: 'Sign in' });
  });

  app.post<{ Body: { email: string; password: string } }>(
    '/sign-in',
    {
      schema: { body: signInBody },
      config: {
        rateLimit: {
          max: deps.signInAttemptsPerMinute ?? 10,
          timeWindow: 60_000,
          errorResponseBuilder: (_request, context) => ({
            statusCode: 429,
            message: `Too many sign-in attempts from your address. Wait ${Math.ceil(context.ttl / 1000)} seconds, then try again.`,
          }),
        },
      },
    },
    async (request, reply) => {
      const account = request.body.email.trim().toLowerCase();
      // Known or not, an email is throttled alike: the answer must not tell which emails are accounts.
      if (!devices.matches(request.cookies[DEVICE_COOKIE], account)) {
        const waitMs = throttle.admit(account);
        if (waitMs > 0) {
          const seconds = Math.ceil(waitMs / 1000);
          request.log.info('console sign-in held back: account throttled');
          return renderPage(
            request,
            reply.header('retry-after', String(seconds)),
            'sign-in',
            {
              title: 'Sign in',
              error: `Too many sign-in attempts to this account failed. Wait ${seconds} seconds, then try again (a browser that signed in to it before is not held back).`,
              email: request.body.email,
            },
            429,
          );
        }
      }
      const user = await users.authenticate(request.body.email, request.body.password);
      if (!user) {
        throttle.failed(account);
        request.log.info('console sign-in refused');
        return renderPage(request, reply, 'sign-in', { title: 'Sign in', error: 'That email and password do not match an account.', email: request.body.email }, 401);
      }
      throttle.succeeded(account);
      reply.setCookie(DEVICE_COOKIE, devices.issue(account), {
        path: '/console',
        httpOnly: true,
        sameSite: 'lax',
        secure: https,
        maxAge: DEVICE_COOKIE_MAX_AGE_S,
      });
      // A new session id on sign-in: a session id planted before cannot be ridden afterwards (session fixation).
      await request.session.regenerate();
      request.session.user = user;
      request.session.signedInAt = Date.now();
      request.log.info({ user_id: user.id }, 'console user signed in');
      return reply.redirect('/console/workspaces', 303);
    },
  );

  app.post('/sign-out', async (request, reply) => {
    await request.session.destroy();
    // The server forgot the session; the browser forgets its cookie too.
    reply.clearCookie(SESSION_COOKIE, { path: '/console', httpOnly: true, sameSite: 'lax', secure: https });
    return reply.redirect('/console', 303);
  });

  app.get('/workspaces', async (request, reply) => {
    const user = request.session.user;
    if (!user) return reply.redirect('/console', 303);
    return renderPage(request, reply, 'workspaces', { title: 'Workspaces', memberships: await users.memberships(user.id) });
  });

  app.post<{ Body: { name?: string } }>('/workspaces', async (request, reply) => {
    const user = request.session.user;
    if (!user) return reply.redirect('/console', 303);
    const name = (request.body?.name ?? '').trim();
    if (name.length === 0 || name.length > 200) {
      return renderPage(
        request,
        reply,
        'workspaces',
        { title: 'Workspaces', memberships: await users.memberships(user.id), error: 'Workspace name: give 1 to 200 characters.' },
        400,
      );
    }
    const plan = deps.plans.includes('free') ? 'free' : deps.plans[0]!;
    const ws = await deps.db.transaction(async (tx) => {
      const created = await new WorkspaceRepo(tx).create(name, plan, actorOf(user));
      await grantRole(tx, created.id, user, 'owner', actorOf(user));
      return created;
    });
    request.session.flash = `Workspace "${ws.name}" created. Create an API key to start sending events.`;
    return reply.redirect(`/console/w/${ws.id}/api-key`, 303);
  });
}
