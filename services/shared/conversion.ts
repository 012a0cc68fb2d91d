/**
 * The conversions.ready record: what enrich emits and the forwarder sends. `record` is exactly one element of the
 * platform's `data[]` (operator contract, "The platform side"); the rest routes and batches it.
 * Its Avro form is schemas/conversion-ready.avsc.
 */
import type { KeyMode } from './envelope.js';

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
}

/** Whether the workspace's first TikTok destination (its forwarding setup) gets this conversion. */
export const forFirstTiktok = (c: Pick<ConversionReady, 'event_source' | 'event_source_id'>): boolean => c.event_source !== '' || c.event_source_id !== '';

/** Partition key on conversions.ready: one workspace's conversion with one event_id always lands together. */
export const conversionKey = (c: Pick<ConversionReady, 'workspace_id' | 'event_id'>): string => `${c.workspace_id}:${c.event_id}`;
