/**
 * Admin API: the workspace's delivery records (operator contract, "Destinations"; forwarder/delivery-repo.ts), newest
 * first a page at a time, and the redrive of the dead and refused ones (datateam/delivery-redrive.ts). Filters are
 * checked as the other admin routes check theirs: a bad one is a 400 problem naming the parameter (an empty time
 * range or a foreign cursor a 422, as for the export and the dead letters).
 */
import type { FastifyInstance } from 'fastify';
import { problems } from '../../gateway/openapi-schemas.js';
import { IngestError } from '../../gateway/problems.js';
import { parseTime } from '../../datateam/routes.js';
import { redriveDeliveries, type DeliveryRedriveDeps } from '../../datateam/delivery-redrive.js';
import { DELIVERY_OUTCOMES, type Delivery, type DeliveryFilter, type DeliveryOutcome } from '../../forwarder/delivery-repo.js';

export type DeliveryRouteDeps = DeliveryRedriveDeps;

/** The filter fields, as the query string and the redrive body name them. */
export interface DeliveryFilterFields {
  readonly destination?: string;
  readonly outcome?: DeliveryOutcome;
  readonly from?: string;
  readonly to?: string;
  readonly event_id?: string;
}

const filterProperties = {
  destination: { type: 'string', minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9._~-]+$', description: 'A destination id (`tiktok` for the first TikTok one).' },
  outcome: { type: 'string', enum: [...DELIVERY_OUTCOMES] },
  from: { type: 'string', format: 'date-time', description: 'RFC 3339: deliveries last attempted at or after it.' },
  to: { type: 'string', format: 'date-time', description: 'RFC 3339: deliveries last attempted before it (after `from`, else 422).' },
  event_id: { type: 'string', minLength: 1, maxLength: 200, description: 'The event id as listed (a live id also finds its `test:` twin).' },
} as const;

const deliveryOut = {
  type: 'object',
  properties: {
    event_id: { type: 'string', description: 'The ledger id: the event id, `test:`-prefixed for a test-mode conversion.' },
    destination: { type: 'string', description: '`tiktok` (the first TikTok destination) or the destination id' },
    kind: { type: 'string', enum: ['tiktok', 'meta', 'google'] },
    outcome: { type: 'string', enum: [...DELIVERY_OUTCOMES] },
    attempts: { type: 'integer' },
    platform_answer: { type: ['object', 'null'], additionalProperties: true, description: 'The platform\'s answer for this event: http_status, code, message, request_id' },
    match_keys: { type: 'array', items: { type: 'string' } },
    match_quality: { type: 'number', minimum: 0, maximum: 10 },
    payload: { description: 'The event as the last attempt sent it, in the platform\'s shape.' },
    attempted_at: { type: 'string', format: 'date-time' },
    sent_at: { type: ['string', 'null'], format: 'date-time' },
  },
} as const;

export function deliveryBody(d: Delivery): Record<string, unknown> {
  return {
    event_id: d.eventId,
    destination: d.destination,
    kind: d.kind,
    outcome: d.outcome,
    attempts: d.attempts,
    platform_answer: d.platformAnswer,
    match_keys: d.matchKeys,
    match_quality: d.matchQuality,
    payload: d.payload,
    attempted_at: d.attemptedAt,
    sent_at: d.sentAt,
  };
}

/**
 * The repo's filter from the fields: 400 naming the field when a time is not RFC 3339; 422 for an empty range (each
 * time valid, together nothing), as the export answers it.
 */
export function deliveryFilter(f: DeliveryFilterFields, part: 'querystring' | 'body'): DeliveryFilter {
  const time = (name: 'from' | 'to'): number | undefined => {
    const v = f[name];
    if (v === undefined) return undefined;
    try {
      return parseTime(name, v);
    } catch (err) {
      if (err instanceof IngestError) throw new IngestError('validation', err.message.replace('querystring.', `${part}.`));
      throw err;
    }
  };
  const from = time('from');
  const to = time('to');
  if (from !== undefined && to !== undefined && from >= to) throw new IngestError('unprocessable', `${part}.to: must be after from`);
  return { destination: f.destination, outcome: f.outcome, from, to, eventId: f.event_id };
}

/** The opaque cursor: the position after which the next page starts. */
const encodeCursor = (id: number): string => Buffer.from(`dv:${id}`).toString('base64url');
function decodeCursor(cursor: string): number {
  const m = /^dv:(\d{1,15})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!m) throw new IngestError('unprocessable', 'querystring.cursor: not a cursor of this list (pass the `next` of the previous page)');
  return Number(m[1]);
}

export function deliveryRoutes(app: FastifyInstance, deps: DeliveryRouteDeps): void {
  const requireWorkspace = async (ws: string): Promise<void> => {
    const r = await deps.db.query('SELECT 1 FROM workspaces WHERE id = $1', [ws]);
    if (r.rows.length === 0) throw new IngestError('notFound', `no workspace ${ws}`);
  };

  app.get<{ Params: { ws: string }; Querystring: DeliveryFilterFields & { limit: number; cursor?: string } }>(
    '/admin/v1/workspaces/:ws/deliveries',
    {
      schema: {
        description:
          "The workspace's delivery records, newest first: per event and destination, the last attempt's outcome, the platform's answer for that event, the match keys sent and their match quality (0–10, scored before sending). `next` is the cursor of the next page (`?cursor=`), null at the end.",
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            ...filterProperties,
            limit: { type: 'integer', minimum: 1, maximum: 500, default: 50 },
            cursor: { type: 'string', minLength: 1, maxLength: 100, description: 'The `next` of the previous page; any other value is a 422.' },
          },
        },
        response: {
          200: { type: 'object', properties: { items: { type: 'array', items: deliveryOut }, next: { type: ['string', 'null'] } } },
          ...problems(422),
        },
      },
    },
    async (request) => {
      const { ws } = request.params;
      const q = request.query;
      const filter = deliveryFilter(q, 'querystring');
      const beforeId = q.cursor === undefined ? undefined : decodeCursor(q.cursor);
      await requireWorkspace(ws);
      const page = await deps.deliveries.list(ws, filter, { beforeId, limit: q.limit });
      return { items: page.map(deliveryBody), next: page.length === q.limit ? encodeCursor(page.at(-1)!.id) : null };
    },
  );

  app.post<{ Params: { ws: string }; Body: DeliveryFilterFields & { ids?: string[] } }>(
    '/admin/v1/workspaces/:ws/deliveries/redrive',
    {
      schema: {
        description:
          'Sends the dead and refused deliveries again, through their dead letters (under today\'s setup; the sent ledgers keep anything already sent from going twice): `{"ids": [event ids as listed]}` (every destination\'s delivery of those events) or the list\'s filter fields (`outcome` then `dead` or `refused`). At most 1,000 a call. Audited.',
        body: {
          type: 'object',
          additionalProperties: false,
          minProperties: 1,
          properties: {
            ids: { type: 'array', minItems: 1, maxItems: 1000, uniqueItems: true, items: filterProperties.event_id },
            ...filterProperties,
            outcome: { type: 'string', enum: ['dead', 'refused'] },
          },
          // A list of event ids, or a filter: not both.
          oneOf: [{ required: ['ids'], maxProperties: 1 }, { not: { required: ['ids'] } }],
        },
        response: { 202: { type: 'object', properties: { redriven: { type: 'integer' } } }, ...problems(422) },
      },
    },
    async (request, reply) => {
      const { ws } = request.params;
      const { ids, ...fields } = request.body;
      const selection = ids ? { eventIds: ids } : { filter: deliveryFilter(fields, 'body') };
      await requireWorkspace(ws);
      const { redriven, failed } = await redriveDeliveries(deps, ws, selection, 'admin');
      request.log.info({ workspace: ws, redriven, failed: failed.length }, 'deliveries redriven');
      return reply.code(202).send({ redriven });
    },
  );
}
