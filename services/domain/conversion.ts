/**
 * The conversions.ready record: what enrich emits and the forwarder sends. `record` is exactly one element of the
 * platform's `data[]` (operator contract, "The platform side"); the rest routes and batches it.
 * Its Avro form is schemas/conversion-ready.avsc.
 */
import type { ConsentState, KeyMode } from './envelope.js';
import type { PiiMode } from './forwarding-setup.js';

export interface PlatformUser {
  /** SHA-256 hex digests only. */
  readonly email?: readonly string[];
  readonly phone?: readonly string[];
  readonly external_id?: readonly string[];
  readonly ttclid?: string;
  readonly user_agent?: string;
}

export interface PlatformEventRecord {
  readonly event: string;
  readonly event_id: string;
  /** Unix seconds. */
  readonly event_time: number;
  readonly limited_data_use: boolean;
  readonly page: { readonly url: string };
  readonly user?: PlatformUser;
  /** `yyyy-mm-dd hh:mm:ss±hh:mm` in the ad account's time zone. */
  readonly conversion_date_time: string;
  readonly transaction_id?: string;
  readonly consent: { readonly ad_user_data: 'GRANTED' | 'DENIED' | 'UNSPECIFIED'; readonly ad_personalization: 'GRANTED' | 'DENIED' | 'UNSPECIFIED' };
  /** Event properties taken from the payload (value, currency, contents…), when present. */
  readonly properties?: Readonly<Record<string, unknown>>;
}

export interface ConversionReady {
  readonly v: 1;
  readonly workspace_id: string;
  readonly key_mode: KeyMode;
  /** = record.event_id; the forwarder's sent-ledger key with the connection. */
  readonly event_id: string;
  /** Epoch ms the gateway received the event (end-to-end latency). */
  readonly received_at: number;
  /** The gateway request that carried the event: the forwarder logs it with the batch that sends the conversion. */
  readonly request_id?: string | null;
  /**
   * From the workspace's forwarding setup (its first TikTok destination). Both empty: that setup did not select the
   * event (or there is none) and only the workspace's other destinations get it (forFirstTiktok).
   */
  readonly event_source: string;
  readonly event_source_id: string;
  /** Set only for events sent with a test-mode key, and only when the setup has a test_event_code. */
  readonly test_event_code: string | null;
  /** The sender's event name (the envelope's `name`): each destination maps it to its platform's event. */
  readonly event_name?: string | null;
  readonly record: PlatformEventRecord;
  /**
   * Why each user field went or not ("why this field", docs/privacy.md): built by enrich, stored by the forwarder's
   * filing with the conversion (off enrich's hot path), read by GET …/conversions/{event_id}. Never sent. Compact as
   * enrich builds it (compactExplanation: the values the record holds left out); expandExplanation gives it whole.
   */
  readonly explanation?: CarriedExplanation;
}

export type AttributionKind = 'event_click' | 'graph_click' | 'enhanced' | 'none';

export interface FieldExplanation {
  readonly field: string;
  readonly sent: boolean;
  /** The rule that let it go (`graph_link`, `event_click`, `graph_click`, `event`, `graph`) or kept it back. */
  readonly rule: string;
  readonly value?: string;
  /** For a value from the identity graph: the node that supplied it and when consenting events saw it. */
  readonly graph_node?: { readonly kind: string; readonly first_seen_at: string; readonly last_seen_at: string };
}

export interface ConversionExplanation {
  readonly consent: ConsentState;
  readonly pii_mode: PiiMode;
  readonly attribution: AttributionKind;
  readonly limited_data_use: boolean;
  readonly fields: readonly FieldExplanation[];
}

/**
 * Where a sent field's value is in the record: the i-th sent entry of a list field is the list's i-th element (enrich
 * lists a field's sources in the order of its values), a single field is the field, and `page.url` is the page's URL
 * whether it went or not. Undefined when the record holds no value for it.
 */
function recordValue(record: PlatformEventRecord, field: string, sent: boolean, index: number): string | undefined {
  const user = record.user;
  switch (field) {
    case 'page.url':
      return record.page.url;
    case 'user.email':
      return sent ? user?.email?.[index] : undefined;
    case 'user.phone':
      return sent ? user?.phone?.[index] : undefined;
    case 'user.external_id':
      return sent ? user?.external_id?.[index] : undefined;
    case 'user.ttclid':
      return sent ? user?.ttclid : undefined;
    case 'user.user_agent':
      return sent ? user?.user_agent : undefined;
    default:
      return undefined;
  }
}

/** Each field of an explanation with the value the record holds for it (recordValue), in order. */
function withRecordValues(e: ConversionExplanation, record: PlatformEventRecord): { field: FieldExplanation; inRecord: string | undefined }[] {
  const sentSoFar = new Map<string, number>();
  return e.fields.map((field) => {
    const index = sentSoFar.get(field.field) ?? 0;
    if (field.sent) sentSoFar.set(field.field, index + 1);
    return { field, inRecord: recordValue(record, field.field, field.sent, index) };
  });
}

/** An explanation as carried and stored: compact when `values_from_record` is set (compactExplanation). */
export type CarriedExplanation = ConversionExplanation & { readonly values_from_record?: true };

/**
 * The explanation as conversions.ready carries it and conversion_explanations stores it: a field's value is left out
 * where the record beside it holds the same value (every value enrich explains is one: a third of the explanation's
 * bytes), marked `values_from_record`. expandExplanation(compactExplanation(e, r), r) is e for every explanation:
 * one whose fields lack a value the record holds (which expansion would fill) is carried whole, unmarked.
 */
export function compactExplanation(e: CarriedExplanation, record: PlatformEventRecord): CarriedExplanation {
  // Already compact (enrich builds it so): as it is, without walking its fields again.
  if (e.values_from_record === true) return e;
  const fields = withRecordValues(e, record);
  if (fields.some(({ field, inRecord }) => field.value === undefined && inRecord !== undefined)) return e;
  return {
    ...e,
    fields: fields.map(({ field, inRecord }) => {
      if (field.value !== inRecord) return field;
      const { value: _inRecord, ...rest } = field;
      return rest;
    }),
    values_from_record: true,
  };
}

/** The whole explanation from what was carried and its record; an unmarked one (whole, or stored before the compact form) as it is. */
export function expandExplanation(carried: CarriedExplanation, record: PlatformEventRecord): ConversionExplanation {
  if (carried.values_from_record !== true) return carried;
  const { values_from_record: _marker, ...e } = carried;
  return {
    ...e,
    fields: withRecordValues(e, record).map(({ field, inRecord }) => {
      if (field.value !== undefined || inRecord === undefined) return field;
      const { field: name, sent, rule, ...rest } = field;
      return { field: name, sent, rule, value: inRecord, ...rest };
    }),
  };
}

/** Whether the workspace's first TikTok destination (its forwarding setup) gets this conversion. */
export const forFirstTiktok = (c: Pick<ConversionReady, 'event_source' | 'event_source_id'>): boolean => c.event_source !== '' || c.event_source_id !== '';

/** Partition key on conversions.ready: one workspace's conversion with one event_id always lands together. */
export const conversionKey = (c: Pick<ConversionReady, 'workspace_id' | 'event_id'>): string => `${c.workspace_id}:${c.event_id}`;

/**
 * The id under which the outbox and the sent ledger know a conversion. Test-mode conversions (sent with a test
 * key, carrying a test_event_code) live apart from live ones: a test event must never make the live conversion
 * with the same event_id look "already sent".
 */
export function ledgerEventId(c: Pick<ConversionReady, 'key_mode' | 'event_id'>): string {
  return c.key_mode === 'test' ? `test:${c.event_id}` : c.event_id;
}
