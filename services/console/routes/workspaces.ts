/** Admin API: workspaces and their API keys (operator contract). */
import type { FastifyInstance } from 'fastify';
import { noContent } from '../../gateway/openapi-schemas.js';
import { IngestError } from '../../gateway/problems.js';
import type { KeyMode } from '../../domain/envelope.js';
import { MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH, passwordProblem, ROLES, type Role, type UserRepo } from '../user-repo.js';
import type { WorkspaceRepo } from '../workspace-repo.js';

const workspaceOut = {
  type: 'object',
  properties: { id: { type: 'string' }, name: { type: 'string' }, plan: { type: 'string' } },
} as const;

const keyOut = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    name: { type: 'string' },
    mode: { type: 'string' },
    start: { type: 'string' },
    created_at: { type: 'string' },
    last_used_at: { type: ['string', 'null'] },
    revoked_at: { type: ['string', 'null'] },
    revoked: { type: 'boolean' },
  },
} as const;

const keyName = { type: 'string', maxLength: 100 } as const;

export function workspaceRoutes(app: FastifyInstance, deps: { repo: WorkspaceRepo; users: UserRepo; plans: readonly string[] }): void {
  const planSchema = { type: 'string', enum: [...deps.plans] } as const;

  app.get<{ Querystring: { limit: number; after?: string } }>(
    '/admin/v1/workspaces',
    {
      schema: {
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { limit: { type: 'integer', minimum: 1, maximum: 500, default: 100 }, after: { type: 'string', minLength: 1 } },
        },
        response: {
          200: {
            type: 'object',
            properties: {
              items: { type: 'array', items: { ...workspaceOut, properties: { ...workspaceOut.properties, created_at: { type: 'string' } } } },
              next: { type: ['string', 'null'] },
            },
          },
        },
      },
    },
    async (request) => {
      const items = await deps.repo.list(request.query.limit, request.query.after);
      return { items, next: items.length === request.query.limit ? items[items.length - 1]!.id : null };
    },
  );

  app.post<{ Body: { name: string; plan?: string } }>(
    '/admin/v1/workspaces',
    {
      schema: {
        body: {
          type: 'object',
          required: ['name'],
          additionalProperties: false,
          properties: { name: { type: 'string', minLength: 1, maxLength: 200, pattern: '\\S' }, plan: planSchema },
        },
        response: { 201: workspaceOut },
      },
    },
    async (request, reply) => {
      const plan = request.body.plan ?? (deps.plans.includes('free') ? 'free' : deps.plans[0]!);
      return reply.code(201).send(await deps.repo.create(request.body.name, plan));
    },
  );

  app.get<{ Params: { ws: string } }>('/admin/v1/workspaces/:ws', { schema: { response: { 200: workspaceOut } } }, async (request) => {
    const ws = await deps.repo.get(request.params.ws);
    if (!ws) throw new IngestError('notFound', `no workspace ${request.params.ws}`);
    return ws;
  });

  app.patch<{ Params: { ws: string }; Body: { plan?: string; name?: string } }>(
    '/admin/v1/workspaces/:ws',
    {
      schema: {
        body: {
          type: 'object',
          additionalProperties: false,
          minProperties: 1,
          properties: { plan: planSchema, name: { type: 'string', minLength: 1, maxLength: 200, pattern: '\\S' } },
        },
        response: { 200: workspaceOut },
      },
    },
    async (request) => {
      const ws = await deps.repo.update(request.params.ws, request.body);
      if (!ws) throw new IngestError('notFound', `no workspace ${request.params.ws}`);
      return ws;
    },
  );

  app.post<{ Params: { ws: string }; Body: { mode: KeyMode; name?: string } }>(
    '/admin/v1/workspaces/:ws/api-keys',
    {
      schema: {
        body: {
          type: 'object',
          required: ['mode'],
          additionalProperties: false,
          properties: { mode: { type: 'string', enum: ['live', 'test'] }, name: keyName },
        },
        response: {
          201: {
            type: 'object',
            properties: {
              id: { type: 'string' },
              key: { type: 'string' },
              mode: { type: 'string' },
              name: { type: 'string' },
              created_at: { type: 'string' },
            },
          },
        },
      },
    },
    async (request, reply) => {
      if (!(await deps.repo.get(request.params.ws))) throw new IngestError('notFound', `no workspace ${request.params.ws}`);
      return reply.code(201).send(await deps.repo.createApiKey(request.params.ws, request.body.mode, request.body.name?.trim() ?? ''));
    },
  );

  app.get<{ Params: { ws: string } }>(
    '/admin/v1/workspaces/:ws/api-keys',
    { schema: { response: { 200: { type: 'object', properties: { keys: { type: 'array', items: keyOut } } } } } },
    async (request) => {
      if (!(await deps.repo.get(request.params.ws))) throw new IngestError('notFound', `no workspace ${request.params.ws}`);
      const keys = await deps.repo.listApiKeys(request.params.ws);
      return {
        keys: keys.map((k) => ({
          id: k.id,
          name: k.name,
          mode: k.mode,
          start: k.displayStart,
          created_at: k.createdAt,
          last_used_at: k.lastUsedAt,
          revoked_at: k.revokedAt,
          revoked: k.revoked,
        })),
      };
    },
  );

  const memberOut = { type: 'object', properties: { id: { type: 'string' }, email: { type: 'string' }, role: { type: 'string' } } } as const;

  app.post<{ Params: { ws: string }; Body: { email: string; password: string; role: Role } }>(
    '/admin/v1/workspaces/:ws/members',
    {
      schema: {
        body: {
          type: 'object',
          required: ['email', 'password', 'role'],
          additionalProperties: false,
          properties: {
            email: { type: 'string', format: 'email', maxLength: 254 },
            password: {
              type: 'string',
              minLength: MIN_PASSWORD_LENGTH,
              maxLength: MAX_PASSWORD_LENGTH,
              description: "The new user's password. An email that is already a console user keeps its own password: this one is then not used.",
            },
            role: { type: 'string', enum: [...ROLES] },
          },
        },
        response: { 201: memberOut },
      },
    },
    async (request, reply) => {
      const { ws } = request.params;
      const problem = passwordProblem(request.body.password);
      if (problem) throw new IngestError('validation', problem);
      if (!(await deps.repo.get(ws))) throw new IngestError('notFound', `no workspace ${ws}`);
      const added = await deps.users.addMember(ws, request.body, 'admin');
      return reply.code(201).send({ id: added.id, email: added.email, role: added.role });
    },
  );

  app.get<{ Params: { ws: string } }>(
    '/admin/v1/workspaces/:ws/members',
    {
      schema: {
        response: {
          200: {
            type: 'object',
            properties: { items: { type: 'array', items: { ...memberOut, properties: { ...memberOut.properties, created_at: { type: 'string' } } } } },
          },
        },
      },
    },
    async (request) => {
      if (!(await deps.repo.get(request.params.ws))) throw new IngestError('notFound', `no workspace ${request.params.ws}`);
      return { items: await deps.users.members(request.params.ws) };
    },
  );

  app.delete<{ Params: { ws: string; id: string } }>('/admin/v1/workspaces/:ws/api-keys/:id', { schema: { response: { 204: noContent('Revoked: the key gets 401 within 5 s.') } } }, async (request, reply) => {
    if (!(await deps.repo.revokeApiKey(request.params.ws, request.params.id))) {
      throw new IngestError('notFound', `no API key ${request.params.id} in workspace ${request.params.ws}`);
    }
    return reply.code(204).send();
  });
}
