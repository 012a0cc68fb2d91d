/**
 * The one internal event envelope. The gateway normalises both request variants (endpoint A, /v1/events, and
 * endpoint B, /v1/sgtm) into it; every later stage sees only this. Its Avro form is schemas/event-envelope.avsc.
 */
export const CONSENT_VALUES = ['GRANTED', 'DENIED', 'UNSPECIFIED'] as const;
export type ConsentValue = (typeof CONSENT_VALUES)[number];

export const CONSENT_PURPOSES = ['analytics_storage', 'ad_storage', 'ad_user_data', 'ad_personalization'] as const;
export type ConsentPurpose = (typeof CONSENT_PURPOSES)[number];
export type ConsentState = Readonly<Record<ConsentPurpose, ConsentValue>>;

/**
 * Identifier kinds. Hashed kinds always hold a lower-case SHA-256 hex digest (the gateway refuses anything else).
 * `other` keeps an alias type of endpoint B that the service does not know yet (alias_type in `alias`).
 */
export const IDENTIFIER_KINDS = [
  'client_id',
  'user_id',
  'organization',
  'email_sha256',
  'email_canonical_sha256',
  'phone_e164_sha256',
  'phone_numeric_sha256',
  'other',
] as const;
export type IdentifierKind = (typeof IDENTIFIER_KINDS)[number];

export interface Identifier {
  readonly kind: IdentifierKind;
  readonly value: string;
  /** For kind `other`: the sender's alias_type. */
  readonly alias?: string;
}

/** Page/session data of a web event (A's FrontendPayload; B's event_payload fields of the same names). */
export interface SessionData {
  readonly client_id?: string;
  readonly session_id?: string;
  readonly page_location?: string;
  readonly page_referrer?: string;
  readonly user_agent?: string;
}

/** Click ids of the page URL's query string, by parameter name (click-id.ts): each goes only to its own platform. */
export const CLICK_ID_PARAMS = ['ttclid', 'fbclid', 'gclid', 'gbraid', 'wbraid'] as const;
export type ClickIdParam = (typeof CLICK_ID_PARAMS)[number];
export type ClickIds = Readonly<Partial<Record<ClickIdParam, string>>>;

/** The commerce fields that are strings as the sender sent them. */
export const COMMERCE_STRING_FIELDS = ['currency', 'content_type', 'description', 'query'] as const;

/**
 * The payload's well-known commerce fields (commerce.ts), in the order a platform record's `properties` lists them:
 * only those present with a plausible type.
 */
export interface Commerce {
  readonly value?: number;
  readonly currency?: string;
  readonly content_type?: string;
  readonly description?: string;
  readonly query?: string;
  readonly contents?: readonly unknown[];
  /** The sender's own order id (its order_id, else its transaction_id), as a string. */
  readonly order_id?: string;
}

export type KeyMode = 'live' | 'test';

/** What an erasure removes from enrich's identity graph: entries by key (kind tag and node id, not identifiers). */
export interface GraphErasure {
  readonly erasure_id: string;
  readonly node_keys: readonly string[];
}
export type Endpoint = 'events' | 'sgtm';
export type EventSource = 'WEB' | 'SERVER';

export interface EventEnvelope {
  /** Envelope format version. */
  readonly v: 1;
  readonly workspace_id: string;
  readonly key_mode: KeyMode;
  readonly api_key_id: string;
  readonly request_id: string;
  /** Index of the event inside its request. */
  readonly index: number;
  /** Epoch ms at which the gateway received the request. */
  readonly received_at: number;
  readonly endpoint: Endpoint;
  /** API-Version applied (endpoint A); for endpoint B the header when sent, else null. */
  readonly api_version: string | null;
  /**
   * The event's idempotency key: A's event_metadata.idempotency_key; B's Idempotency-Key header (suffixed
   * `:<index>` when the request holds several events). null when the sender gave none.
   */
  readonly idempotency_key: string | null;
  /**
   * What dedupe keys on, with its scope: `event` (A: first event with the key wins) or `request` (B: the first
   * request with the header key wins, with all its events). null: nothing to dedupe at ingestion.
   */
  readonly dedupe: { readonly key: string; readonly scope: 'event' | 'request' } | null;
  /** A's event_source; null for endpoint B, which carries none. */
  readonly source: EventSource | null;
  readonly name: string;
  readonly consent: ConsentState;
  readonly identifiers: readonly Identifier[];
  readonly session: SessionData | null;
  /** A's event_data, B's event_payload: kept whole. A stage reads the typed fields below instead where it can. */
  readonly payload: Readonly<Record<string, unknown>>;
  /**
   * What the stages read of the page URL and the payload, typed by the gateway so that no stage parses either for
   * them. Absent on envelopes written before the fields existed: then they are derived from the session's page URL
   * and the payload (clickIdsOf, commerceOf), with the same result.
   */
  readonly click_ids?: ClickIds;
  readonly commerce?: Commerce;
  /**
   * Epoch ms at which the event happened, as the sender said (API-Version 2026-12-01: A's `event_time`, B's
   * `event_metadata.event_time`, checked against received_at). Absent: unknown, use received_at.
   * NOTE: optional (null in Avro) so that envelopes written before the field existed stay valid and unchanged.
   */
  readonly event_time?: number;
  /**
   * Only on an erasure record (privacy/erasure-steps.ts), never on an accepted event: routed to the identity graph's
   * partition of events.deduped, it removes the identifiers' clusters from enrich's state.
   */
  readonly graph_erasure?: GraphErasure;
}


/** The partition key of an envelope: workspace + dedupe key, so a key's events and its dedupe state co-locate. */
/**
 * The key of an event on events.deduped: its identity graph (workspace and key mode), so that one partition owns a
 * graph and enrich keeps it as partition-local state without a lock.
 */
export const graphOwnerKey = (e: Pick<EventEnvelope, 'workspace_id' | 'key_mode'>): string => `${e.workspace_id}:${e.key_mode}`;

export function envelopeKey(e: Pick<EventEnvelope, 'workspace_id' | 'dedupe' | 'request_id' | 'index'>): string {
  return e.dedupe ? `${e.workspace_id}:${e.dedupe.key}` : `${e.workspace_id}:${e.request_id}:${e.index}`;
}
