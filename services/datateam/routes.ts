/**
 * Admin API for data teams (operator contract, "Data-team operations"): a workspace's dead letters (list, one,
 * redrive, discard) and the export of its accepted events as NDJSON. The replay routes live beside these
 * (services/replay). Errors are the admin API's problem documents (400 bad input, 404 unknown workspace or letter).
 */
import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { ErasureFilter } from '../enrich/identity/erasure-filter.js';
import { PATH_SEGMENT, problemResponse } from '../gateway/openapi-schemas.js';
import { IngestError } from '../gateway/problems.js';
import type { Db } from '../shared/db/db.js';
import type { AcceptedEvents } from './accepted-events.js';
import type { DeadLetterRepo, DeadLetterStatus, StoredDeadLetter } from './dead-letter-repo.js';
import { NotDeadLetters, UnknownDeadLetters, type RedriveResult, type Redriver } from './redrive.js';
import type { TopicRecords } from './topic-records.js';
import { Topics, type TopicName } from '../shared/topics.js';

export interface DataTeamDeps {
  readonly db: Db;
  readonly deadLetters: DeadLetterRepo;
  readonly redriver: Redriver;
  readonly acceptedEvents: AcceptedEvents;
  readonly topicRecords: TopicRecords;
}

const DEAD_LETTER_ID = '^dl_[0-9A-Za-z]{16}$';

const ndjson = (description: string) => ({ description, content: { 'application/x-ndjson': { schema: { type: 'string' } } } });

const letterOut = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    stage: { type: 'string', description: 'dedupe, enrich or forwarder' },
    topic: { type: 'string', description: 'the dead-letter topic: events.dlq (a stage) or conversions.dlq (the forwarder)' },
    reason: { type: 'string' },
    error: { type: ['string', 'null'] },
    attempts: { type: 'integer', description: 'how many times the record was dead-lettered (a failed redrive adds one)' },
    status: { type: 'string', enum: ['dead', 'redriven'] },
    first_failed_at: { type: 'string', format: 'date-time' },
    last_failed_at: { type: 'string', format: 'date-time' },
    redriven_at: { type: ['string', 'null'], format: 'date-time' },
    event_id: { type: ['string', 'null'] },
  },
} as const;

const wsParams = { type: 'object', required: ['ws'], properties: { ws: PATH_SEGMENT } } as const;
const letterParams = {
  type: 'object',
  required: ['ws', 'id'],
  properties: { ws: wsParams.properties.ws, id: { type: 'string', pattern: DEAD_LETTER_ID } },
} as const;

function letterBody(l: StoredDeadLetter, withValue = false): Record<string, unknown> {
  return {
    id: l.id,
    stage: l.stage,
    topic: l.topic,
    reason: l.reason,
    error: l.error,
    attempts: l.attempts,
    status: l.status,
    first_failed_at: l.firstFailedAt,
    last_failed_at: l.lastFailedAt,
    redriven_at: l.redrivenAt,
    event_id: l.eventId,
    ...(withValue ? { value: l.value } : {}),
  };
}

/** The opaque paging cursor: the position after which the next page starts. */
const encodeCursor = (seq: number): string => Buffer.from(`dl:${seq}`).toString('base64url');
function decodeCursor(cursor: string): number {
  const m = /^dl:(\d{1,15})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!m) throw new IngestError('unprocessable', 'querystring.cursor: not a cursor of this list (pass the `next` of the previous page)');
  return Number(m[1]);
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

/** An RFC 3339 time of the query, in epoch ms; 400 naming the parameter otherwise. */
export function parseTime(name: string, value: string | undefined): number {
  if (value === undefined || value === '') throw new IngestError('validation', `querystring.${name}: required, an RFC 3339 time such as 2026-11-22T00:00:00Z`);
  const ms = Date.parse(value);
  if (!RFC3339.test(value) || Number.isNaN(ms)) {
    throw new IngestError('validation', `querystring.${name}: "${value.slice(0, 60)}" is not an RFC 3339 time (e.g. 2026-11-22T00:00:00Z)`);
  }
  return ms;
}

export function dataTeamRoutes(app: FastifyInstance, deps: DataTeamDeps): void {
  const requireWorkspace = async (ws: string): Promise<void> => {
    const r = await deps.db.query('SELECT 1 FROM workspaces WHERE id = $1', [ws]);
    if (r.rows.length === 0) throw new IngestError('notFound', `no workspace ${ws}`);
  };

  app.get<{ Params: { ws: string }; Querystring: { limit: number; cursor?: string; status: DeadLetterStatus; stage?: string } }>(
    '/admin/v1/workspaces/:ws/dead-letters',
    {
      schema: {
        description: "The workspace's dead letters, oldest first, a page at a time (`next` is the cursor of the next page, null at the end).",
        params: wsParams,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            limit: { type: 'integer', minimum: 1, maximum: 500, default: 100 },
            cursor: { type: 'string', minLength: 1, maxLength: 100, description: 'The `next` of the previous page; any other value is a 422.' },
            status: { type: 'string', enum: ['dead', 'redriven'], default: 'dead' },
            stage: { type: 'string', enum: ['dedupe', 'enrich', 'forwarder'] },
          },
        },
        response: {
          200: { type: 'object', properties: { items: { type: 'array', items: letterOut }, next: { type: ['string', 'null'] } } },
          422: problemResponse(422),
        },
      },
    },
    async (request) => {
      const { ws } = request.params;
      const q = request.query;
      const afterSeq = q.cursor === undefined ? 0 : decodeCursor(q.cursor);
      await requireWorkspace(ws);
      const page = await deps.deadLetters.list(ws, { status: q.status, stage: q.stage, afterSeq, limit: q.limit });
      return { items: page.map((l) => letterBody(l)), next: page.length === q.limit ? encodeCursor(page.at(-1)!.seq) : null };
    },
  );

  app.get<{ Params: { ws: string; id: string } }>(
    '/admin/v1/workspaces/:ws/dead-letters/:id',
    {
      schema: {
        description: 'One dead letter with its `value`: the letter as written on its topic (the envelope or conversion inside).',
        params: letterParams,
        response: { 200: { ...letterOut, properties: { ...letterOut.properties, value: {} } } },
      },
    },
    async (request) => {
      const { ws, id } = request.params;
      await requireWorkspace(ws);
      const [letter] = await deps.deadLetters.byIds(ws, [id]);
      if (!letter) throw new IngestError('notFound', `workspace ${ws} has no dead letter ${id}`);
      return letterBody(letter, true);
    },
  );

  app.post<{ Params: { ws: string }; Body: { ids?: string[]; all?: boolean } }>(
    '/admin/v1/workspaces/:ws/dead-letters/redrive',
    {
      schema: {
        description:
          'Sends dead letters back through their stage under today\'s setup: `{"ids": [...]}` or `{"all": true}`. A letter that cannot go back stays, attempts raised, and is listed in `failed`.',
        params: wsParams,
        body: {
          type: 'object',
          additionalProperties: false,
          properties: {
            ids: { type: 'array', minItems: 1, maxItems: 1000, uniqueItems: true, items: { type: 'string', pattern: DEAD_LETTER_ID } },
            all: { type: 'boolean', const: true },
          },
          // Exactly one of the two: a list, or everything.
          oneOf: [{ required: ['ids'], not: { required: ['all'] } }, { required: ['all'], not: { required: ['ids'] } }],
        },
        response: {
          409: problemResponse(409),
          202: {
            type: 'object',
            properties: {
              redriven: { type: 'integer' },
              failed: { type: 'array', items: { type: 'object', properties: { id: { type: 'string' }, error: { type: 'string' } } } },
            },
          },
        },
      },
    },
    async (request, reply) => {
      const { ws } = request.params;
      const { ids, all } = request.body;
      if ((ids === undefined) === (all === undefined)) throw new IngestError('validation', 'body: give either "ids" (a list of dead letter ids) or "all": true');
      await requireWorkspace(ws);
      let result: RedriveResult;
      try {
        result = await deps.redriver.redriveSelection(ws, ids ? { ids } : { all: true }, 'admin');
      } catch (err) {
        if (err instanceof UnknownDeadLetters) throw new IngestError('notFound', `workspace ${ws} has ${err.message}`);
        if (err instanceof NotDeadLetters) throw new IngestError('conflict', err.message);
        throw err;
      }
      const { redriven, failed } = result;
      request.log.info({ workspace: ws, redriven, failed: failed.length }, 'dead letters redriven');
      return reply.code(202).send({ redriven, failed });
    },
  );

  app.delete<{ Params: { ws: string; id: string } }>(
    '/admin/v1/workspaces/:ws/dead-letters/:id',
    {
      schema: {
        description: 'Discards a dead letter for good: it is deleted, and the audit log keeps what it was (stage, reason, event id, attempts).',
        params: letterParams,
        response: { 204: { type: 'null' } },
      },
    },
    async (request, reply) => {
      const { ws, id } = request.params;
      await requireWorkspace(ws);
      if (!(await deps.deadLetters.discard(ws, id))) throw new IngestError('notFound', `workspace ${ws} has no dead letter ${id}`);
      return reply.code(204).send();
    },
  );

  app.get<{ Params: { topic: TopicName }; Querystring: { last?: number; key_prefix?: string } }>(
    '/admin/v1/topics/:topic/records',
    {
      schema: {
        description:
          "Records of a topic, decoded (Avro on Kafka), as NDJSON lines `{topic, partition, offset, timestamp, key, value}`: the last `last` of every partition, or all from the start when `last` is absent; `key_prefix` keeps only keys that start with it (a workspace's: `ws_…:`).",
        params: { type: 'object', required: ['topic'], properties: { topic: { type: 'string', enum: Object.values(Topics) } } },
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { last: { type: 'integer', minimum: 1, maximum: 1_000_000 }, key_prefix: { type: 'string', minLength: 1, maxLength: 300 } },
        },
        produces: ['application/x-ndjson'],
        response: { 200: ndjson('One record a line, as JSON.') },
      },
    },
    async (request, reply) => {
      const abort = new AbortController();
      reply.raw.once('close', () => abort.abort()); // finished, or the client went away
      const q = { last: request.query.last, keyPrefix: request.query.key_prefix };
      const lines = async function* (): AsyncGenerator<string> {
        for await (const r of deps.topicRecords(request.params.topic, q, abort.signal)) yield `${JSON.stringify(r)}\n`;
      };
      return reply.type('application/x-ndjson').header('cache-control', 'no-store').send(Readable.from(lines(), { objectMode: false }));
    },
  );

  app.get<{ Params: { ws: string }; Querystring: { from?: string; to?: string } }>(
    '/admin/v1/workspaces/:ws/events/export',
    {
      schema: {
        description:
          "Streams the workspace's accepted events received in [from, to) as NDJSON: one envelope a line (with its `idempotency_key`), in log order. `from` and `to` are RFC 3339 times.",
        params: wsParams,
        querystring: {
          type: 'object',
          additionalProperties: false,
          required: ['from', 'to'],
          properties: { from: { type: 'string', format: 'date-time' }, to: { type: 'string', format: 'date-time' } },
        },
        produces: ['application/x-ndjson'],
        response: { 200: ndjson('One accepted envelope a line, as JSON.'), 422: problemResponse(422) },
      },
    },
    async (request, reply) => {
      const { ws } = request.params;
      const from = parseTime('from', request.query.from);
      const to = parseTime('to', request.query.to);
      if (from >= to) throw new IngestError('unprocessable', 'querystring.to: must be after from');
      await requireWorkspace(ws);
      const abort = new AbortController();
      reply.raw.once('close', () => abort.abort()); // finished, or the client went away
      // An erased person's envelopes still on a Kafka topic are left out (docs/privacy.md, the redaction list).
      const erased = await ErasureFilter.load(deps.db, ws);
      const lines = async function* (): AsyncGenerator<string> {
        for await (const envelope of deps.acceptedEvents.read(ws, from, to, abort.signal)) {
          if (!erased.matches(envelope)) yield `${JSON.stringify(envelope)}\n`;
        }
      };
      // Readable.from pulls a line only when the response can take it: constant memory, the client's pace.
      return reply
        .type('application/x-ndjson')
        .header('cache-control', 'no-store')
        .send(Readable.from(lines(), { objectMode: false, highWaterMark: 64 * 1024 }));
    },
  );
}
