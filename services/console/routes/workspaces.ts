/** Admin API: workspaces and their API keys (operator contract). */
import type { FastifyInstance } from 'fastify';
import { IngestError } from '../../gateway/problems.js';
import type { KeyMode } from '../../shared/envelope.js';
import type { WorkspaceRepo } from '../workspace-repo.js';

const workspaceOut = {
  type: 'object',
  properties: { id: { type: 'string' }, name: { type: 'string' }, plan: { type: 'string' } },
} as const;

export function workspaceRoutes(app: FastifyInstance, deps: { repo: WorkspaceRepo; plans: readonly string[] }): void {
  const planSchema = { type: 'string', enum: [...deps.plans] } as const;

  app.post<{ Body: { name: string; plan?: string } }>(
    '/admin/v1/workspaces',
    {
      schema: {
        body: {
          type: 'object',
          required: ['name'],
          additionalProperties: false,
          properties: { name: { type: 'string', minLength: 1, maxLength: 200 }, plan: planSchema },
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
          properties: { plan: planSchema, name: { type: 'string', minLength: 1, maxLength: 200 } },
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

  app.post<{ Params: { ws: string }; Body: { mode: KeyMode } }>(
    '/admin/v1/workspaces/:ws/api-keys',
    {
      schema: {
        body: {
          type: 'object',
          required: ['mode'],
          additionalProperties: false,
          properties: { mode: { type: 'string', enum: ['live', 'test'] } },
        },
        response: {
          201: { type: 'object', properties: { id: { type: 'string' }, key: { type: 'string' }, mode: { type: 'string' } } },
        },
      },
    },
    async (request, reply) => {
      if (!(await deps.repo.get(request.params.ws))) throw new IngestError('notFound', `no workspace ${request.params.ws}`);
      return reply.code(201).send(await deps.repo.createApiKey(request.params.ws, request.body.mode));
    },
  );

  app.get<{ Params: { ws: string } }>('/admin/v1/workspaces/:ws/api-keys', async (request) => {
    if (!(await deps.repo.get(request.params.ws))) throw new IngestError('notFound', `no workspace ${request.params.ws}`);
    const keys = await deps.repo.listApiKeys(request.params.ws);
    return { keys: keys.map((k) => ({ id: k.id, mode: k.mode, start: k.displayStart, revoked: k.revoked })) };
  });

  app.delete<{ Params: { ws: string; id: string } }>('/admin/v1/workspaces/:ws/api-keys/:id', async (request, reply) => {
    if (!(await deps.repo.revokeApiKey(request.params.ws, request.params.id))) {
      throw new IngestError('notFound', `no API key ${request.params.id} in workspace ${request.params.ws}`);
    }
    return reply.code(204).send();
  });
}
