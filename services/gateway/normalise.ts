/**
 * The envelope normaliser: both request variants become the one internal EventEnvelope. Inputs have passed
 * schema validation; this only reshapes (consent to one enum, identifiers to one typed list, hashes lower-cased).
 */
import type {
  ConsentState,
  ConsentValue,
  EventEnvelope,
  Identifier,
  KeyMode,
  SessionData,
} from '../domain/envelope.js';
import { clickIdsFromUrl } from '../domain/click-id.js';
import { commerceFromPayload } from '../domain/commerce.js';
import { parseEventTime } from './validation/event-time.js';
import { isV20261201OrLater } from './validation/validate.js';

export interface RequestContext {
  readonly workspaceId: string;
  readonly keyMode: KeyMode;
  readonly apiKeyId: string;
  readonly requestId: string;
  readonly receivedAt: number;
}

// NOTE (performance): every envelope is built as ONE object literal with all its fields, in a fixed order: spreading
// shared fields into it leaves the envelope in V8's dictionary mode, slowing every later step (bench/README.md).

// ---- endpoint A ----------------------------------------------------------------------------------------------

interface WebOrServerEvent {
  event_name: string;
  /** API-Version 2026-12-01 and later. */
  event_time?: string | number;
  event_source: 'WEB' | 'SERVER';
  event_data: Record<string, unknown>;
  event_metadata: {
    idempotency_key: string;
    identifiers: {
      user?: string;
      organization?: string;
      email?: { sha256_email: string; sha256_canonical?: string };
      phone?: { sha256_e164: string; sha256_e164_numeric: string };
    };
    consent: Record<keyof ConsentState, ConsentValue>;
  };
}

export function normaliseEvent(ctx: RequestContext, apiVersion: string, raw: unknown, index: number): EventEnvelope {
  const e = raw as WebOrServerEvent;
  const ids = e.event_metadata.identifiers;
  const identifiers: Identifier[] = [];
  const session = e.event_source === 'WEB' ? frontendSession(e.event_data) : null;
  if (session?.client_id) identifiers.push({ kind: 'client_id', value: session.client_id });
  if (ids.user) identifiers.push({ kind: 'user_id', value: ids.user });
  if (ids.organization) identifiers.push({ kind: 'organization', value: ids.organization });
  if (ids.email) {
    identifiers.push({ kind: 'email_sha256', value: ids.email.sha256_email.toLowerCase() });
    if (ids.email.sha256_canonical) {
      identifiers.push({ kind: 'email_canonical_sha256', value: ids.email.sha256_canonical.toLowerCase() });
    }
  }
  if (ids.phone) {
    identifiers.push({ kind: 'phone_e164_sha256', value: ids.phone.sha256_e164.toLowerCase() });
    identifiers.push({ kind: 'phone_numeric_sha256', value: ids.phone.sha256_e164_numeric.toLowerCase() });
  }
  const c = e.event_metadata.consent;
  const key = e.event_metadata.idempotency_key;
  const eventTime =
    e.event_time !== undefined && isV20261201OrLater(apiVersion) ? parseEventTime(e.event_time, `[${index}].event_time`, ctx.receivedAt) : null;
  const envelope: { -readonly [K in keyof EventEnvelope]: EventEnvelope[K] } = {
    v: 1,
    workspace_id: ctx.workspaceId,
    key_mode: ctx.keyMode,
    api_key_id: ctx.apiKeyId,
    request_id: ctx.requestId,
    index,
    received_at: ctx.receivedAt,
    endpoint: 'events',
    api_version: apiVersion,
    idempotency_key: key,
    dedupe: { key, scope: 'event' },
    source: e.event_source,
    name: e.event_name,
    consent: {
      analytics_storage: c.analytics_storage,
      ad_storage: c.ad_storage,
      ad_user_data: c.ad_user_data,
      ad_personalization: c.ad_personalization,
    },
    identifiers,
    session,
    payload: e.event_data,
    ...typedFields(session, e.event_data),
  };
  // NOTE: set only when given, so envelopes without it stay exactly as they were (and as Avro decodes them).
  if (eventTime !== null) envelope.event_time = eventTime;
  return envelope;
}

/** The fields the stages read of the page URL and the payload, typed once here (EventEnvelope.click_ids, .commerce). */
function typedFields(session: SessionData | null, payload: Readonly<Record<string, unknown>>): Pick<EventEnvelope, 'click_ids' | 'commerce'> {
  return { click_ids: clickIdsFromUrl(session?.page_location), commerce: commerceFromPayload(payload) };
}

function frontendSession(d: Record<string, unknown>): SessionData {
  const s: { -readonly [K in keyof SessionData]: SessionData[K] } = {
    client_id: d.client_id as string,
    session_id: d.session_id as string,
    page_location: d.page_location as string,
    user_agent: d.user_agent as string,
  };
  if (typeof d.page_referrer === 'string') s.page_referrer = d.page_referrer;
  return s;
}

// ---- endpoint B ----------------------------------------------------------------------------------------------

interface SgtmEvent {
  event_name: string;
  event_payload: Record<string, unknown>;
  event_metadata: {
    consent: Record<keyof ConsentState, boolean>;
    identifiers: Array<Record<string, unknown> & { alias_type: string }>;
    /** API-Version 2026-12-01 and later. */
    event_time?: string | number;
  };
}

const SESSION_FIELDS = ['client_id', 'session_id', 'page_location', 'page_referrer', 'user_agent'] as const;

const granted = (b: boolean): ConsentValue => (b ? 'GRANTED' : 'DENIED');

/**
 * `apiVersion`: the API-Version header when the sender gave one (null: none, the behaviour before versions on B).
 * `requestKey` is the Idempotency-Key header. A request with several events gives each `<key>:<index>`, and dedupe
 * works on the request key (the first request wins whole). Without a header, event ids derive from the payload.
 */
export function normaliseSgtmEvent(
  ctx: RequestContext,
  raw: unknown,
  index: number,
  requestKey: string | undefined,
  eventsInRequest: number,
  apiVersion: string | null = null,
): EventEnvelope {
  const e = raw as SgtmEvent;
  const identifiers: Identifier[] = [];
  const v20261201 = isV20261201OrLater(apiVersion);
  for (const id of e.event_metadata.identifiers) {
    if (v20261201 && id.alias_type === 'phone') {
      identifiers.push({ kind: 'phone_e164_sha256', value: (id.hashed_phone as string).toLowerCase() });
      if (typeof id.hashed_phone_numeric === 'string') {
        identifiers.push({ kind: 'phone_numeric_sha256', value: id.hashed_phone_numeric.toLowerCase() });
      }
      continue;
    }
    switch (id.alias_type) {
      case 'client':
        identifiers.push({ kind: 'client_id', value: id.anonymous_client_id as string });
        break;
      case 'user':
        identifiers.push({ kind: 'user_id', value: id.user_id as string });
        break;
      case 'email':
        identifiers.push({ kind: 'email_sha256', value: (id.hashed_email as string).toLowerCase() });
        break;
      default: {
        // Unknown alias types are kept (never forwarded): the first string value field, else the element as JSON.
        const field = Object.keys(id).find((k) => k !== 'alias_type' && typeof id[k] === 'string');
        identifiers.push({ kind: 'other', alias: id.alias_type, value: field ? (id[field] as string) : JSON.stringify(id) });
      }
    }
  }
  // Page data of a web-originated sGTM event travels in event_payload under the GA4 names.
  let session: Record<string, string> | null = null;
  for (const f of SESSION_FIELDS) {
    const v = e.event_payload[f];
    if (typeof v === 'string' && v !== '') (session ??= {})[f] = v;
  }
  if (session?.client_id && !identifiers.some((i) => i.kind === 'client_id')) {
    identifiers.push({ kind: 'client_id', value: session.client_id });
  }
  const c = e.event_metadata.consent;
  const idempotencyKey = requestKey === undefined ? null : eventsInRequest > 1 ? `${requestKey}:${index}` : requestKey;
  const time = e.event_metadata.event_time;
  const eventTime =
    time !== undefined && v20261201 ? parseEventTime(time, `[${index}].event_metadata.event_time`, ctx.receivedAt) : null;
  const envelope: { -readonly [K in keyof EventEnvelope]: EventEnvelope[K] } = {
    v: 1,
    workspace_id: ctx.workspaceId,
    key_mode: ctx.keyMode,
    api_key_id: ctx.apiKeyId,
    request_id: ctx.requestId,
    index,
    received_at: ctx.receivedAt,
    endpoint: 'sgtm',
    api_version: apiVersion,
    idempotency_key: idempotencyKey,
    dedupe: requestKey === undefined ? null : { key: requestKey, scope: 'request' },
    source: null,
    name: e.event_name,
    consent: {
      analytics_storage: granted(c.analytics_storage),
      ad_storage: granted(c.ad_storage),
      ad_user_data: granted(c.ad_user_data),
      ad_personalization: granted(c.ad_personalization),
    },
    identifiers,
    session,
    payload: e.event_payload,
    ...typedFields(session, e.event_payload),
  };
  if (eventTime !== null) envelope.event_time = eventTime;
  return envelope;
}

