/**
 * Admin API: the workspace's forwarding setup (operator contract, "Forwarding setup body"). PUT replaces it whole;
 * GET reads it. Enrich picks a change up within its settings cache TTL (1 s).
 */
import type { FastifyInstance } from 'fastify';
import { problemResponse } from '../../gateway/openapi-schemas.js';
import { IngestError } from '../../gateway/problems.js';
import type { Db } from '../../shared/db/db.js';
import type { ForwardingSetupInput } from '../../domain/forwarding-setup.js';
import { ForwardingRepo } from '../forwarding-repo.js';
import { PLATFORM_EVENT_SOURCES, PLATFORM_EVENTS } from '../platform-events.js';

const text = (max: number) => ({ type: 'string', minLength: 1, maxLength: max, pattern: '\\S' }) as const;

const selectedEvent = {
  type: 'object',
  required: ['name', 'platform_event'],
  additionalProperties: false,
  properties: { name: text(256), platform_event: { type: 'string', enum: [...PLATFORM_EVENTS] } },
} as const;

export const setupBody = {
  type: 'object',
  required: ['event_source', 'event_source_id', 'pii_mode', 'click_window_days', 'events'],
  additionalProperties: false,
  properties: {
    event_source: { type: 'string', enum: [...PLATFORM_EVENT_SOURCES] },
    event_source_id: text(128),
    pii_mode: { type: 'string', enum: ['hashed', 'none'] },
    click_window_days: { type: 'integer', minimum: 1, maximum: 90 },
    // NOTE: not anyOf [string, null]: with Fastify's type coercion an empty string would be coerced to null there.
    test_event_code: { type: ['string', 'null'], minLength: 1, maxLength: 100, pattern: '\\S' },
    events: { type: 'array', maxItems: 200, items: selectedEvent },
  },
} as const;

const setupOut = {
  type: 'object',
  properties: {
    workspace_id: { type: 'string' },
    event_source: { type: 'string' },
    event_source_id: { type: 'string' },
    pii_mode: { type: 'string' },
    click_window_days: { type: 'integer' },
    test_event_code: { type: ['string', 'null'] },
    events: { type: 'array', items: { type: 'object', properties: { name: { type: 'string' }, platform_event: { type: 'string' } } } },
    updated_at: { type: 'string' },
  },
} as const;

/** An event name listed twice (a setup maps each name once), or undefined. */
export function repeatedEventName(events: ForwardingSetupInput['events']): string | undefined {
  const names = events.map((e) => e.name);
  return names.find((n, i) => names.indexOf(n) !== i);
}

export function forwardingRoutes(app: FastifyInstance, deps: { db: Db }): void {
  const repo = new ForwardingRepo(deps.db);

  app.put<{ Params: { ws: string }; Body: ForwardingSetupInput }>(
    '/admin/v1/workspaces/:ws/forwarding',
    { schema: { body: setupBody, response: { 200: setupOut, 422: problemResponse(422) } } },
    async (request) => {
      const { ws } = request.params;
      const repeated = repeatedEventName(request.body.events);
      if (repeated !== undefined) throw new IngestError('unprocessable', `events: "${repeated}" is listed more than once`);
      if (!(await repo.workspaceExists(ws))) throw new IngestError('notFound', `no workspace ${ws}`);
      return repo.put(ws, request.body);
    },
  );

  app.get<{ Params: { ws: string } }>(
    '/admin/v1/workspaces/:ws/forwarding',
    { schema: { response: { 200: setupOut } } },
    async (request) => {
      const setup = await repo.get(request.params.ws);
      if (!setup) throw new IngestError('notFound', `workspace ${request.params.ws} has no forwarding setup`);
      return setup;
    },
  );
}
