/**
 * Structural check of an EventEnvelope read from a topic. The gateway writes only valid envelopes, but a stage must
 * never trust its input blindly: a record written by an older or broken producer goes to the dead-letter topic
 * with a reason instead of crashing the stage (or, worse, being half-processed).
 */
import { CONSENT_PURPOSES, CONSENT_VALUES, IDENTIFIER_KINDS, type EventEnvelope } from './envelope.js';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isString = (v: unknown): v is string => typeof v === 'string';
const consentValues: ReadonlySet<unknown> = new Set(CONSENT_VALUES);
const identifierKinds: ReadonlySet<unknown> = new Set(IDENTIFIER_KINDS);
const SESSION_FIELDS = ['client_id', 'session_id', 'page_location', 'page_referrer', 'user_agent'] as const;
const NON_EMPTY_FIELDS = ['workspace_id', 'api_key_id', 'request_id', 'name'] as const;

/** Returns the envelope when it is well formed, else a short reason naming the first bad field. */
export function checkEnvelope(value: unknown): { ok: true; envelope: EventEnvelope } | { ok: false; reason: string } {
  const bad = (reason: string) => ({ ok: false as const, reason });
  if (!isObject(value)) return bad('envelope is not an object');
  if (value.v !== 1) return bad(`unsupported envelope version ${JSON.stringify(value.v)}`);
  for (const f of NON_EMPTY_FIELDS) {
    if (!isString(value[f]) || value[f] === '') return bad(`${f} must be a non-empty string`);
  }
  if (value.key_mode !== 'live' && value.key_mode !== 'test') return bad('key_mode must be live or test');
  if (value.endpoint !== 'events' && value.endpoint !== 'sgtm') return bad('endpoint must be events or sgtm');
  if (!Number.isInteger(value.index) || (value.index as number) < 0) return bad('index must be a non-negative integer');
  if (typeof value.received_at !== 'number' || !Number.isFinite(value.received_at)) return bad('received_at must be epoch ms');
  if (value.idempotency_key !== null && !isString(value.idempotency_key)) return bad('idempotency_key must be a string or null');
  if (value.dedupe !== null) {
    const d = value.dedupe;
    if (!isObject(d) || !isString(d.key) || d.key === '' || (d.scope !== 'event' && d.scope !== 'request')) {
      return bad('dedupe must be null or {key, scope: event|request}');
    }
  }
  if (value.source !== null && value.source !== 'WEB' && value.source !== 'SERVER') return bad('source must be WEB, SERVER or null');
  if (!isObject(value.consent)) return bad('consent must be an object');
  for (const p of CONSENT_PURPOSES) {
    if (!consentValues.has(value.consent[p])) return bad(`consent.${p} must be one of ${CONSENT_VALUES.join(', ')}`);
  }
  if (!Array.isArray(value.identifiers)) return bad('identifiers must be an array');
  for (let i = 0; i < value.identifiers.length; i++) {
    const id: unknown = value.identifiers[i];
    if (!isObject(id) || !identifierKinds.has(id.kind) || !isString(id.value)) return bad(`identifiers[${i}] is not {kind, value}`);
  }
  if (value.session !== null) {
    if (!isObject(value.session)) return bad('session must be an object or null');
    for (const f of SESSION_FIELDS) {
      if (value.session[f] !== undefined && !isString(value.session[f])) return bad(`session.${f} must be a string`);
    }
  }
  // A payload decoded from Kafka is parsed on first read (stream/kafka/avro-mapping.ts): checked by a stage that reads it.
  if (!Object.getOwnPropertyDescriptor(value, 'payload')?.get && !isObject(value.payload)) return bad('payload must be an object');
  if (value.graph_erasure !== undefined) {
    const g = value.graph_erasure;
    if (!isObject(g) || !isString(g.erasure_id) || !Array.isArray(g.node_keys) || !g.node_keys.every(isString)) {
      return bad('graph_erasure must be {erasure_id, node_keys: [string]}');
    }
  }
  return { ok: true, envelope: value as unknown as EventEnvelope };
}
