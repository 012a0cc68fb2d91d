/**
 * How each topic's value maps onto its Avro schema (schemas/*.avsc). The TypeScript types stay the domain's own
 * (EventEnvelope, ConversionReady, ...); these functions translate at the edge:
 *  - optional properties become nullable fields (union with null, default null) and come back omitted, so a value
 *    decoded from Kafka is deep-equal to the one the producer had (the same object the embedded log returns);
 *  - free-form JSON (an envelope's payload, a conversion's properties, a dead letter's value) is carried as a JSON
 *    text field (`payload_json`, ...): Avro has no "any" type, and the sender's data is open-ended by contract.
 */
import { compactExplanation, expandExplanation, type ConversionReady, type PlatformEventRecord, type PlatformUser } from '../../domain/conversion.js';
import { CLICK_ID_PARAMS, COMMERCE_STRING_FIELDS, type Commerce, type EventEnvelope, type Identifier, type SessionData } from '../../domain/envelope.js';
import { Topics, type TopicName } from '../../shared/topics.js';
import type { DeadLetter } from '../../domain/dead-letter.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
type AvroValue = Record<string, any>;

export interface TopicMapping<T> {
  /** File under schemas/. */
  readonly schemaFile: string;
  toAvro(value: T): AvroValue;
  fromAvro(avro: AvroValue): T;
}

/** Copies the non-null fields of `src` named in `fields` (optional properties: null ↔ absent). */
function nonNullFields<K extends string>(src: AvroValue, fields: readonly K[]): Partial<Record<K, any>> {
  const out: Partial<Record<K, any>> = {};
  for (const f of fields) if (src[f] !== null && src[f] !== undefined) out[f] = src[f];
  return out;
}

function nullable<K extends string>(src: Partial<Record<K, unknown>>, fields: readonly K[]): Record<K, unknown> {
  const out = {} as Record<K, unknown>;
  for (const f of fields) out[f] = src[f] ?? null;
  return out;
}

const SESSION_FIELDS = ['client_id', 'session_id', 'page_location', 'page_referrer', 'user_agent'] as const;
const USER_FIELDS = ['email', 'phone', 'external_id', 'ttclid', 'user_agent'] as const;

/**
 * An envelope's payload is parsed when a stage first reads it, not when it is decoded: the stages read the typed
 * fields (click_ids, commerce), so most events' payloads are never parsed after the gateway. The text stays on the
 * decoded envelope (a non-enumerable key, so a copy does not take it), so re-encoding one that no stage replaced
 * writes the same text without serialising the payload again.
 */
const PAYLOAD_TEXT = Symbol('payload_json');

const payloadTextOf = (e: object): string | undefined => (e as { [PAYLOAD_TEXT]?: string })[PAYLOAD_TEXT];

function commerceToAvro(c: Commerce): AvroValue {
  return {
    value: c.value ?? null,
    currency: c.currency ?? null,
    content_type: c.content_type ?? null,
    description: c.description ?? null,
    query: c.query ?? null,
    contents_json: c.contents === undefined ? null : JSON.stringify(c.contents),
    order_id: c.order_id ?? null,
  };
}

function commerceFromAvro(a: AvroValue): Commerce {
  const out: { -readonly [K in keyof Commerce]: Commerce[K] } = {};
  if (a.value !== null) out.value = a.value;
  for (const f of COMMERCE_STRING_FIELDS) if (a[f] !== null) out[f] = a[f];
  if (a.contents_json !== null) out.contents = JSON.parse(a.contents_json);
  if (a.order_id !== null) out.order_id = a.order_id;
  return out;
}

export const envelopeMapping: TopicMapping<EventEnvelope> = {
  schemaFile: 'event-envelope.avsc',
  toAvro(e) {
    // NOTE: one literal, not `{...rest}` of a destructured object: rest/spread is V8's slow path, and this runs once
    // per accepted event.
    return {
      v: e.v,
      workspace_id: e.workspace_id,
      key_mode: e.key_mode,
      api_key_id: e.api_key_id,
      request_id: e.request_id,
      index: e.index,
      received_at: e.received_at,
      endpoint: e.endpoint,
      api_version: e.api_version,
      idempotency_key: e.idempotency_key,
      dedupe: e.dedupe,
      source: e.source,
      name: e.name,
      consent: e.consent,
      identifiers: e.identifiers.map((i) => ({ kind: i.kind, value: i.value, alias: i.alias ?? null })),
      session: e.session === null ? null : nullable(e.session, SESSION_FIELDS),
      payload_json: payloadTextOf(e) ?? JSON.stringify(e.payload),
      event_time: e.event_time ?? null,
      graph_erasure: e.graph_erasure ?? null,
      click_ids: e.click_ids === undefined ? null : nullable(e.click_ids, CLICK_ID_PARAMS),
      commerce: e.commerce === undefined ? null : commerceToAvro(e.commerce),
    };
  },
  fromAvro(a) {
    const text = a.payload_json as string;
    // What the envelope guard checked of an eager payload: a JSON object (the rest of the text is checked on first read).
    if (text.charCodeAt(0) !== 0x7b) throw new Error('payload_json is not a JSON object');
    let parsed: unknown;
    // One literal (the payload's getter in it) and plain assignments: no rest/spread and no defineProperty for the
    // getter, V8's slow paths, and every stage decodes every envelope.
    const envelope: Record<string, unknown> = {
      v: a.v,
      workspace_id: a.workspace_id,
      key_mode: a.key_mode,
      api_key_id: a.api_key_id,
      request_id: a.request_id,
      index: a.index,
      received_at: a.received_at,
      endpoint: a.endpoint,
      api_version: a.api_version,
      idempotency_key: a.idempotency_key,
      dedupe: a.dedupe === null ? null : { key: a.dedupe.key, scope: a.dedupe.scope },
      source: a.source,
      name: a.name,
      consent: { analytics_storage: a.consent.analytics_storage, ad_storage: a.consent.ad_storage, ad_user_data: a.consent.ad_user_data, ad_personalization: a.consent.ad_personalization },
      identifiers: (a.identifiers as AvroValue[]).map((i): Identifier => (i.alias === null ? { kind: i.kind, value: i.value } : { kind: i.kind, value: i.value, alias: i.alias })),
      session: a.session === null ? null : (nonNullFields(a.session, SESSION_FIELDS) as SessionData),
      get payload() {
        return (parsed ??= JSON.parse(text));
      },
    };
    // Optional fields are absent, not null, when the record has none (or was written before they existed).
    const { event_time, graph_erasure, click_ids, commerce } = a;
    if (event_time !== null && event_time !== undefined) envelope.event_time = Number(event_time);
    if (graph_erasure !== null && graph_erasure !== undefined) envelope.graph_erasure = { erasure_id: graph_erasure.erasure_id, node_keys: [...graph_erasure.node_keys] };
    if (click_ids !== null && click_ids !== undefined) envelope.click_ids = nonNullFields(click_ids, CLICK_ID_PARAMS);
    if (commerce !== null && commerce !== undefined) envelope.commerce = commerceFromAvro(commerce);
    Object.defineProperty(envelope, PAYLOAD_TEXT, { value: text });
    return envelope as unknown as EventEnvelope;
  },
};

/** Dedupe's state value (services/dedupe/seen-marker.ts DedupeState), kept structural here. */
interface SeenMarkerValue {
  readonly first_seen: number;
  readonly request_id: string;
}
interface DedupeStateValue {
  readonly v: number;
  readonly live?: SeenMarkerValue | null;
  readonly test?: SeenMarkerValue | null;
}

export const dedupeStateMapping: TopicMapping<DedupeStateValue> = {
  schemaFile: 'dedupe-state.avsc',
  toAvro: (s) => ({ v: s.v, live: s.live ?? null, test: s.test ?? null }),
  // NOTE: a marker that is null in Avro comes back absent (the TypeScript state treats both alike).
  fromAvro: (a) => ({
    v: a.v,
    ...(a.live === null ? {} : { live: { first_seen: a.live.first_seen, request_id: a.live.request_id } }),
    ...(a.test === null ? {} : { test: { first_seen: a.test.first_seen, request_id: a.test.request_id } }),
  }),
};

export const conversionMapping: TopicMapping<ConversionReady> = {
  schemaFile: 'conversion-ready.avsc',
  toAvro(c) {
    // One literal per level (no rest/spread: V8's slow path, once per conversion).
    const r = c.record;
    const u = r.user;
    return {
      v: c.v,
      workspace_id: c.workspace_id,
      key_mode: c.key_mode,
      event_id: c.event_id,
      received_at: c.received_at,
      request_id: c.request_id ?? null,
      event_source: c.event_source,
      event_source_id: c.event_source_id,
      test_event_code: c.test_event_code,
      event_name: c.event_name ?? null,
      record: {
        event: r.event,
        event_id: r.event_id,
        event_time: r.event_time,
        limited_data_use: r.limited_data_use,
        page: { url: r.page.url },
        user:
          u === undefined
            ? null
            : { email: u.email ?? null, phone: u.phone ?? null, external_id: u.external_id ?? null, ttclid: u.ttclid ?? null, user_agent: u.user_agent ?? null },
        conversion_date_time: r.conversion_date_time,
        transaction_id: r.transaction_id ?? null,
        consent: { ad_user_data: r.consent.ad_user_data, ad_personalization: r.consent.ad_personalization },
        properties_json: r.properties === undefined ? null : JSON.stringify(r.properties),
      },
      explanation_json: c.explanation === undefined ? null : JSON.stringify(compactExplanation(c.explanation, c.record)),
    };
  },
  fromAvro(a) {
    // Plain assignments, no rest/spread (V8's slow path; the forwarder decodes every conversion); keys in the order
    // the spreads gave them, so the JSON the forwarder stores is unchanged.
    const r = a.record as AvroValue;
    const out: { -readonly [K in keyof PlatformEventRecord]: PlatformEventRecord[K] } = {
      event: r.event,
      event_id: r.event_id,
      event_time: r.event_time,
      limited_data_use: r.limited_data_use,
      conversion_date_time: r.conversion_date_time,
      page: { url: r.page.url },
    } as PlatformEventRecord;
    if (r.user !== null) out.user = nonNullFields(r.user, USER_FIELDS) as PlatformUser;
    if (r.transaction_id !== null) out.transaction_id = r.transaction_id;
    out.consent = { ad_user_data: r.consent.ad_user_data, ad_personalization: r.consent.ad_personalization };
    if (r.properties_json !== null) out.properties = JSON.parse(r.properties_json);
    const conversion: { -readonly [K in keyof ConversionReady]: ConversionReady[K] } = {
      v: a.v,
      workspace_id: a.workspace_id,
      key_mode: a.key_mode,
      event_id: a.event_id,
      received_at: a.received_at,
      event_source: a.event_source,
      event_source_id: a.event_source_id,
      test_event_code: a.test_event_code,
      record: out,
    };
    // request_id is optional (records written before it have none): absent, not null, as the service builds them.
    if (a.request_id !== null && a.request_id !== undefined) conversion.request_id = a.request_id;
    if (a.event_name !== null && a.event_name !== undefined) conversion.event_name = a.event_name;
    if (a.explanation_json !== null && a.explanation_json !== undefined) conversion.explanation = expandExplanation(JSON.parse(a.explanation_json), out);
    return conversion;
  },
};

export const deadLetterMapping: TopicMapping<DeadLetter> = {
  schemaFile: 'dead-letter.avsc',
  toAvro: ({ value, ...rest }) => ({ ...rest, value_json: JSON.stringify(value ?? null) }),
  fromAvro: ({ value_json, ...rest }) => ({ ...(rest as Omit<DeadLetter, 'value'>), value: JSON.parse(value_json) }),
};

/** services/forwarder/outbox-repo.ts ConversionDeadLetter, kept structural here (no import of the forwarder). */
interface ConversionDeadLetterValue {
  readonly record: unknown;
  readonly [field: string]: unknown;
}

export const conversionDeadLetterMapping: TopicMapping<ConversionDeadLetterValue> = {
  schemaFile: 'conversion-dead-letter.avsc',
  toAvro: ({ record, ...rest }) => ({
    ...rest,
    ...nullable(rest as Record<string, unknown>, ['event_source', 'event_source_id', 'test_event_code', 'platform_code', 'request_id']),
    record_json: JSON.stringify(record ?? null),
  }),
  fromAvro: ({ record_json, ...rest }) => ({ ...rest, record: JSON.parse(record_json) }),
};

/**
 * Enrich's store entries (services/enrich/identity/graph-state.ts, event-id-claims.ts), kept structural here: a
 * cluster has `into`, a claim `claimed_at`, a click list `clicks` alone. A cluster without click ids of its own
 * writes its `clicks` field empty, and reads back without one; one written before `clicks_apart` reads back without
 * that (not known).
 */
type GraphEntryValue = Record<string, unknown>;

const NO_ENTRY = { node: null, cluster: null, claim: null, click_list: null };

export const identityStateMapping: TopicMapping<GraphEntryValue> = {
  schemaFile: 'identity-state.avsc',
  toAvro: (v) =>
    'into' in v
      ? { ...NO_ENTRY, cluster: { clicks: [], ...v } }
      : 'claimed_at' in v
        ? { ...NO_ENTRY, claim: v }
        : 'cluster' in v
          ? { ...NO_ENTRY, node: v }
          : { ...NO_ENTRY, click_list: v },
  fromAvro: (a) => {
    if (a.cluster) {
      const { clicks, clicks_apart: apart, ...cluster } = a.cluster as { clicks: unknown[]; clicks_apart: boolean | null };
      return { ...cluster, ...(clicks.length > 0 ? { clicks } : {}), ...(apart === null ? {} : { clicks_apart: apart }) };
    }
    return (a.node ?? a.claim ?? a.click_list) as GraphEntryValue;
  },
};

/** GraphChanges: the rows' workspace and key mode are the record's, not repeated per row on the wire. */
interface GraphChangesValue {
  readonly workspace_id: string;
  readonly key_mode: string;
  readonly nodes: ReadonlyArray<Record<string, unknown>>;
  readonly edges: ReadonlyArray<Record<string, unknown>>;
  readonly [field: string]: unknown;
}

export const identityChangesMapping: TopicMapping<GraphChangesValue> = {
  schemaFile: 'identity-changes.avsc',
  // The row schemas have no workspace_id or key_mode: avsc writes a record's schema fields only, so the rows go as
  // they are (no copy of each without the two).
  toAvro: (c) => c,
  fromAvro: (a) => {
    const { workspace_id, key_mode } = a as GraphChangesValue;
    // The decoded rows are this record's own: they take the scope in place.
    for (const rows of [a.nodes, a.edges] as AvroValue[][]) {
      for (const row of rows) {
        row.workspace_id = workspace_id;
        row.key_mode = key_mode;
      }
    }
    return a as GraphChangesValue;
  },
};

/** Every topic's value mapping; events.raw and events.deduped share the envelope schema. */
export const TOPIC_MAPPINGS: Readonly<Record<TopicName, TopicMapping<any>>> = {
  [Topics.eventsRaw]: envelopeMapping,
  [Topics.eventsDeduped]: envelopeMapping,
  [Topics.dedupeState]: dedupeStateMapping,
  [Topics.identityState]: identityStateMapping,
  [Topics.identityChanges]: identityChangesMapping,
  [Topics.conversionsReady]: conversionMapping,
  [Topics.eventsDlq]: deadLetterMapping,
  [Topics.conversionsDlq]: conversionDeadLetterMapping,
};
