/**
 * A destination kind: what the forwarder needs to know of one advertising platform to deliver conversions to it.
 * The sender owns the outbox, the ledger, leases and backoff; a kind only shapes requests, sends them and says
 * what each answer means, for the batch and for each event in it. Kinds: tiktok.ts, meta.ts, google.ts.
 */
import type { PlatformEventRecord } from '../../domain/conversion.js';
import type { Classification } from '../classify.js';
import type { PlatformAnswer } from '../platform-client.js';
import type { MatchScore } from './match-quality.js';

/** The batch key: one platform request carries one event source, one pixel and one test code. */
export interface BatchGroup {
  readonly eventSource: string;
  readonly eventSourceId: string;
  /** '' = none. */
  readonly testEventCode: string;
}

export const DESTINATION_KINDS = ['tiktok', 'meta', 'google'] as const;
export type DestinationKindName = (typeof DESTINATION_KINDS)[number];

/**
 * How a kind is authorised: `oauth_refresh` (an authorisation code, then access tokens renewed with a refresh
 * token) or `long_lived` (one token that lasts weeks; when the platform stops taking it, only the advertiser can
 * authorise again).
 */
export type AuthKind = 'oauth_refresh' | 'long_lived';

/** One conversion on its way to a platform: its ledger id and the record enrich built. */
export interface Outgoing {
  readonly eventId: string;
  readonly record: PlatformEventRecord;
}

/** What a platform's consent rules make of one record: the record to send, or why it must not go there. */
export type ConsentDecision =
  | { readonly send: true; readonly record: PlatformEventRecord }
  | { readonly send: false; readonly reason: string };

/** What one answer means for one event of the batch it answered. */
export type EventResult =
  | { readonly outcome: 'sent' }
  | { readonly outcome: 'refused'; readonly code: number; readonly message: string };

export type PermanentClassification = Extract<Classification, { kind: 'permanent' }>;

export interface DestinationKind<Body = unknown> {
  readonly name: DestinationKindName;
  readonly auth: AuthKind;
  /** The most events one request may carry. */
  readonly batchLimit: number;
  /** The platform's consent rules applied to one record. */
  consent(record: PlatformEventRecord): ConsentDecision;
  /** The request body for a batch of one group (records already through `consent`). */
  request(group: BatchGroup, batch: readonly Outgoing[]): Body;
  /** The events of a request, one per record of its batch and in its order: each event's payload as sent. */
  payloads(body: Body): readonly unknown[];
  /** The match keys one payload carries and their score (match-quality.ts). */
  match(payload: unknown): MatchScore;
  /** Sends one request; resolves to the answer whatever happened (never throws for the platform or network). */
  send(accessToken: string, body: Body): Promise<PlatformAnswer>;
  classify(answer: PlatformAnswer): Classification;
  /** For an answer classified ok: what became of each event of the batch, in its order. */
  results(batch: readonly Outgoing[], answer: PlatformAnswer): EventResult[];
  /** A batch refused for one of its records: the part to try first (the suspect, if the answer names it) and the rest. */
  isolate<T>(batch: readonly T[], c: PermanentClassification): [T[], T[]];
}

/** The usual split of a refused batch: two halves, so one bad record among n is found in log2(n) requests. */
export function halves<T>(batch: readonly T[]): [T[], T[]] {
  const half = Math.ceil(batch.length / 2);
  return [batch.slice(0, half), batch.slice(half)];
}
