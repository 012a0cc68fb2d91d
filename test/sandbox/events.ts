import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { API_PREFIX, EVENT_SOURCES, KNOWN_EVENTS, MAX_RECORDS_PER_BATCH, PlatformCode, type EventSource } from './codes.js';
import { applyFault } from './faults.js';
import { authenticate } from './oauth.js';
import { sendApi } from './respond.js';
import { isoAt, nextRequestId, type SandboxState } from './state.js';

export interface TrackBatch {
  event_source: EventSource;
  event_source_id: string;
  test_event_code: string | null;
  data: Record<string, unknown>[];
}

export type TrackValidation = { ok: true; batch: TrackBatch } | { ok: false; message: string };

type Obj = Record<string, unknown>;

const SHA256_HEX = /^[0-9a-f]{64}$/;
const CURRENCY = /^[A-Z]{3}$/;
/** event_time values at or above this look like milliseconds (year 2286 in seconds). */
const MAX_EVENT_TIME_SECONDS = 10_000_000_000;
const MAX_EVENT_ID_LENGTH = 256;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function optionalString(o: Obj, key: string, where: string): string | null {
  const v = o[key];
  if (v === undefined || v === null) return null;
  return typeof v === 'string' ? null : `${where}.${key}: must be a string`;
}

function hashedList(user: Obj, key: string, where: string): string | null {
  const v = user[key];
  if (v === undefined) return null;
  if (!Array.isArray(v)) return `${where}.${key}: must be an array of SHA-256 hex strings`;
  for (const [i, item] of v.entries()) {
    if (typeof item !== 'string' || !SHA256_HEX.test(item)) {
      return `${where}.${key}[${i}]: must be a lowercase hex SHA-256 hash (64 characters)`;
    }
  }
  return null;
}

function validateUser(user: unknown, where: string): string | null {
  if (user === undefined) return null;
  if (!isObj(user)) return `${where}: must be an object`;
  for (const key of ['email', 'phone', 'external_id']) {
    const err = hashedList(user, key, where);
    if (err) return err;
  }
  for (const key of ['ttclid', 'ttp', 'user_agent', 'ip', 'locale']) {
    const err = optionalString(user, key, where);
    if (err) return err;
  }
  return null;
}

function validatePage(page: unknown, where: string): string | null {
  if (page === undefined) return null;
  if (!isObj(page)) return `${where}: must be an object`;
  return optionalString(page, 'url', where) ?? optionalString(page, 'referrer', where);
}

function validateProperties(props: unknown, where: string): string | null {
  if (props === undefined) return null;
  if (!isObj(props)) return `${where}: must be an object`;
  if (props.value !== undefined && (typeof props.value !== 'number' || !Number.isFinite(props.value))) {
    return `${where}.value: must be a number`;
  }
  if (props.currency !== undefined && (typeof props.currency !== 'string' || !CURRENCY.test(props.currency))) {
    return `${where}.currency: must be an ISO 4217 code such as USD`;
  }
  if (props.contents !== undefined && (!Array.isArray(props.contents) || !props.contents.every(isObj))) {
    return `${where}.contents: must be an array of objects`;
  }
  return null;
}

/** Validate one record of `data`; returns a message naming the offending field, or null. */
export function validateRecord(record: unknown, index: number): string | null {
  const where = `data[${index}]`;
  if (!isObj(record)) return `${where}: must be an object`;
  const event = record.event;
  if (typeof event !== 'string' || event.length === 0) return `${where}.event: required`;
  if (!KNOWN_EVENTS.has(event)) return `${where}.event: unknown event name "${event}"`;
  const eventId = record.event_id;
  if (typeof eventId !== 'string' || eventId.length === 0) return `${where}.event_id: required, must be a non-empty string`;
  if (eventId.length > MAX_EVENT_ID_LENGTH) return `${where}.event_id: longer than ${MAX_EVENT_ID_LENGTH} characters`;
  const t = record.event_time;
  if (typeof t !== 'number' || !Number.isInteger(t) || t <= 0) {
    return `${where}.event_time: required, must be an integer unix timestamp in seconds`;
  }
  if (t >= MAX_EVENT_TIME_SECONDS) return `${where}.event_time: must be in seconds, not milliseconds`;
  if (record.limited_data_use !== undefined && typeof record.limited_data_use !== 'boolean') {
    return `${where}.limited_data_use: must be a boolean`;
  }
  return (
    validateUser(record.user, `${where}.user`) ??
    validatePage(record.page, `${where}.page`) ??
    validateProperties(record.properties, `${where}.properties`)
  );
}

/** Validate an event/track body the way the platform does; any invalid record rejects the whole batch. */
export function validateTrackBody(body: unknown): TrackValidation {
  if (!isObj(body)) return { ok: false, message: 'request body must be a JSON object' };
  const source = body.event_source;
  if (typeof source !== 'string' || !(EVENT_SOURCES as readonly string[]).includes(source)) {
    return { ok: false, message: `event_source: must be one of ${EVENT_SOURCES.join(', ')}` };
  }
  const sourceId = body.event_source_id;
  if (typeof sourceId !== 'string' || sourceId.trim().length === 0) {
    return { ok: false, message: 'event_source_id: required, must be a non-empty string' };
  }
  const testCode = body.test_event_code;
  if (testCode !== undefined && testCode !== null && typeof testCode !== 'string') {
    return { ok: false, message: 'test_event_code: must be a string' };
  }
  const data = body.data;
  if (!Array.isArray(data) || data.length === 0) {
    return { ok: false, message: 'data: required, must be a non-empty array of events' };
  }
  if (data.length > MAX_RECORDS_PER_BATCH) {
    return { ok: false, message: `data: too many events (${data.length}); at most ${MAX_RECORDS_PER_BATCH} per request` };
  }
  for (const [i, record] of data.entries()) {
    const err = validateRecord(record, i);
    if (err) return { ok: false, message: err };
  }
  return {
    ok: true,
    batch: {
      event_source: source as EventSource,
      event_source_id: sourceId,
      test_event_code: typeof testCode === 'string' ? testCode : null,
      data: data as Obj[],
    },
  };
}

async function track(state: SandboxState, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const endpoint = 'events' as const;
  if (await applyFault(state, endpoint, request, reply)) return reply;
  const auth = authenticate(state, request.headers['access-token']);
  if (!auth.ok) return sendApi(state, request, reply, { endpoint, code: auth.code });
  const result = validateTrackBody(request.body);
  if (!result.ok) return sendApi(state, request, reply, { endpoint, code: PlatformCode.PARAM_ERROR, message: result.message });
  const { batch } = result;
  const receivedAt = isoAt(state);
  const advertiserId = auth.grant.advertiser_ids[0] ?? null;
  const requestId = nextRequestId(state);
  for (const record of batch.data) {
    state.received.push({
      event_source: batch.event_source,
      event_source_id: batch.event_source_id,
      test_event_code: batch.test_event_code,
      advertiser_id: advertiserId,
      received_at: receivedAt,
      request_id: requestId,
      record: structuredClone(record),
    });
  }
  return sendApi(state, request, reply, { endpoint, data: {}, requestId });
}

export function registerEventRoutes(app: FastifyInstance, state: SandboxState): void {
  app.post(`${API_PREFIX}/event/track/`, async (request, reply) => track(state, request, reply));
}
