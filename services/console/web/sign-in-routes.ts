/** Console: sign in, sign out, and the workspace list / create page. */
import type { FastifyInstance } from 'fastify';
import { grantRole, UserRepo } from '../user-repo.js';
import { WorkspaceRepo } from '../workspace-repo.js';
import { renderPage, type ConsoleWebDeps } from './plugin.js';

const signInBody = {
  type: 'object',
  required: ['email', 'password'],
  properties: { email: { type: 'string', maxLength: 254 }, password: { type: 'string', maxLength: 1024 }, _csrf: { type: 'string' } },
} as const;

/** The actor written to the audit log for a console user. */
export const actorOf = (user: { email: string }): string => `console:${user.email}`;

export function signInRoutes(app: FastifyInstance, deps: ConsoleWebDeps): void {
  const users = new UserRepo(deps.db);

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
      const user = await users.authenticate(request.body.email, request.body.password);
      if (!user) {
        request.log.info('console sign-in refused');
        return renderPage(request, reply, 'sign-in', { title: 'Sign in', error: 'That email and password do not match an account.', email: request.body.email }, 401);
      }
      // A new session id on sign-in: a session id planted before cannot be ridden afterwards (session fixation).
      await request.session.regenerate();
      request.session.user = user;
      request.log.info({ user_id: user.id }, 'console user signed in');
      return reply.redirect('/console/workspaces', 303);
    },
  );

  app.post('/sign-out', async (request, reply) => {
    await request.session.destroy();
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
