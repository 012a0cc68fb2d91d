/**
 * Admin API, privacy (operator contract, "Privacy"; docs/privacy.md):
 *   POST /admin/v1/workspaces/{ws}/erasures            202 {id, status}: forget a person
 *   GET  /admin/v1/workspaces/{ws}/erasures/{id}       200 {id, status, removed: {store: n}, …}
 *   GET  /admin/v1/workspaces/{ws}/conversions/{event_id}   200 the forwarded record and why each user field went
 * Unknown workspace, unknown id, another workspace's id, an explanation past its retention: 404.
 */
import type { FastifyInstance } from 'fastify';
import { IngestError } from '../gateway/problems.js';
import type { Db } from '../shared/db/db.js';
import { ErasureRepo, type ErasureIdentifiers } from './erasures.js';
import { ExplanationRepo } from './explanations.js';

const SHA256 = '^[0-9a-fA-F]{64}$';
const idText = { type: 'string', minLength: 1, maxLength: 512, pattern: '\\S' } as const;

const IDENTIFIER_NAMES = ['user', 'sha256_email', 'sha256_phone', 'client_id'];

/**
 * An identifier name the route does not know is refused, not dropped: an erasure that silently ignored
 * `"email": …` would tell the caller a person was forgotten when nothing of theirs was looked for. (Fastify's
 * validator strips unknown properties before the schema's additionalProperties could refuse them.)
 */
function unknownIdentifier(body: unknown): string | undefined {
  const ids = (body as { identifiers?: unknown } | null)?.identifiers;
  if (ids === null || typeof ids !== 'object' || Array.isArray(ids)) return undefined;
  return Object.keys(ids).find((k) => !IDENTIFIER_NAMES.includes(k));
}

const erasureBody = {
  type: 'object',
  required: ['identifiers'],
  additionalProperties: false,
  properties: {
    identifiers: {
      type: 'object',
      additionalProperties: false,
      minProperties: 1,
      properties: {
        user: idText,
        sha256_email: { type: 'string', pattern: SHA256 },
        sha256_phone: { type: 'string', pattern: SHA256 },
        client_id: idText,
      },
    },
  },
} as const;

const erasureOut = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    status: { type: 'string' },
    requested_at: { type: 'string' },
    finished_at: { type: ['string', 'null'] },
    removed: { type: 'object', additionalProperties: { type: 'integer' } },
    subject: { type: 'object', additionalProperties: { type: 'string' } },
    error: { type: ['string', 'null'] },
  },
} as const;

const fieldOut = {
  type: 'object',
  properties: {
    field: { type: 'string' },
    sent: { type: 'boolean' },
    rule: { type: 'string' },
    value: { type: 'string' },
    graph_node: {
      type: 'object',
      properties: { kind: { type: 'string' }, first_seen_at: { type: 'string' }, last_seen_at: { type: 'string' } },
    },
  },
} as const;

const conversionOut = {
  type: 'object',
  properties: {
    event_id: { type: 'string' },
    key_mode: { type: 'string' },
    built_at: { type: 'string' },
    expires_at: { type: 'string' },
    delivery: {
      type: 'object',
      properties: { status: { type: 'string' }, at: { type: ['string', 'null'] }, platform_request_id: { type: ['string', 'null'] } },
    },
    record: { type: 'object', additionalProperties: true },
    consent: { type: 'object', additionalProperties: { type: 'string' } },
    pii_mode: { type: 'string' },
    attribution: { type: 'string' },
    limited_data_use: { type: 'boolean' },
    fields: { type: 'array', items: fieldOut },
  },
} as const;

type Ws = { ws: string };

export function privacyRoutes(app: FastifyInstance, deps: { readonly db: Db; readonly onErasure?: () => void; readonly explanationRetentionMs: number }): void {
  const erasures = new ErasureRepo(deps.db);
  const explanations = new ExplanationRepo(deps.db, deps.explanationRetentionMs);
  const workspaceExists = async (ws: string): Promise<boolean> =>
    (await deps.db.query('SELECT 1 FROM workspaces WHERE id = $1', [ws])).rows.length > 0;

  app.post<{ Params: Ws; Body: { identifiers: ErasureIdentifiers } }>(
    '/admin/v1/workspaces/:ws/erasures',
    {
      schema: { body: erasureBody, response: { 202: { type: 'object', properties: { id: { type: 'string' }, status: { type: 'string' } } } } },
      preValidation: async (request) => {
        const unknown = unknownIdentifier(request.body);
        if (unknown !== undefined) {
          throw new IngestError('validation', `body.identifiers.${unknown} is not an identifier an erasure takes (one of ${IDENTIFIER_NAMES.join(', ')})`);
        }
      },
    },
    async (request, reply) => {
      const { ws } = request.params;
      if (!(await workspaceExists(ws))) throw new IngestError('notFound', `no workspace ${ws}`);
      const ids = request.body.identifiers;
      // Hashes are stored lower case everywhere (docs/identifiers.md): upper case is accepted here as at ingestion.
      const normalised: ErasureIdentifiers = {
        ...ids,
        ...(ids.sha256_email ? { sha256_email: ids.sha256_email.toLowerCase() } : {}),
        ...(ids.sha256_phone ? { sha256_phone: ids.sha256_phone.toLowerCase() } : {}),
      };
      const erasure = await erasures.request(ws, normalised);
      deps.onErasure?.();
      return reply.code(202).send({ id: erasure.id, status: erasure.status });
    },
  );

  app.get<{ Params: Ws & { id: string } }>(
    '/admin/v1/workspaces/:ws/erasures/:id',
    { schema: { response: { 200: erasureOut } } },
    async (request) => {
      const erasure = await erasures.get(request.params.ws, request.params.id);
      if (!erasure) throw new IngestError('notFound', `no erasure ${request.params.id} in workspace ${request.params.ws}`);
      return erasure;
    },
  );

  app.get<{ Params: Ws & { event_id: string } }>(
    '/admin/v1/workspaces/:ws/conversions/:event_id',
    {
      schema: {
        params: {
          type: 'object',
          required: ['event_id'],
          properties: {
            // An event id is the sender's idempotency key: any characters, percent-encoded in the path.
            event_id: { type: 'string', minLength: 1, maxLength: 100, description: 'At most 100 characters as sent, percent-encoded (longer: 414).' },
          },
        },
        response: { 200: conversionOut },
      },
    },
    async (request) => {
      const found = await explanations.get(request.params.ws, request.params.event_id);
      if (!found) {
        throw new IngestError(
          'notFound',
          `no conversion ${request.params.event_id} in workspace ${request.params.ws} (unknown, erased, or past its retention of ${Math.round(deps.explanationRetentionMs / 86_400_000)} days)`,
        );
      }
      return found;
    },
  );
}
