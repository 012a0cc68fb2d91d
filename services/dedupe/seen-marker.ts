/**
 * Dedupe's state and its one rule, as pure functions: first seen wins per (workspace, dedupe key), within a window.
 * The state value is what the runtime stores under the envelope's partition key (`workspace:dedupe-key`), so on
 * Kafka it is a compacted changelog co-partitioned with events.raw. Live and test traffic keep separate markers in
 * the same value: a test-mode key never makes a live event a duplicate, nor the reverse.
 */
import type { EventEnvelope, KeyMode } from '../domain/envelope.js';

export interface SeenMarker {
  /** Epoch ms the gateway received the first event with this key (the window is measured from it). */
  readonly first_seen: number;
  /** The request that carried it: for request-scoped keys (endpoint B), its other events pass too. */
  readonly request_id: string;
}

/** A mode without a marker is absent, or null when the state went through Avro (schemas/dedupe-state.avsc). */
export type DedupeState = { readonly v: 1 } & Partial<Readonly<Record<KeyMode, SeenMarker | null>>>;

export type Verdict =
  /** First time inside the window: pass, and remember it. */
  | { readonly kind: 'first'; readonly next: DedupeState }
  /** Another event of the request that was first with a request-scoped key: pass, nothing to remember. */
  | { readonly kind: 'same_request' }
  | { readonly kind: 'duplicate'; readonly reason: 'duplicate' | 'duplicate_request' };

type Deduped = Pick<EventEnvelope, 'key_mode' | 'request_id' | 'received_at'> & {
  readonly dedupe: NonNullable<EventEnvelope['dedupe']>;
};

/** A marker older than the window counts as absent (and is overwritten), whether or not it was purged yet. */
export function isLive(marker: SeenMarker | null | undefined, at: number, windowMs: number): marker is SeenMarker {
  // NOTE: a negative age (gateway clocks out of step, or a replay) is inside the window: never a second "first".
  return marker != null && at - marker.first_seen < windowMs;
}

export function dedupeVerdict(state: DedupeState | undefined, e: Deduped, windowMs: number): Verdict {
  const marker = state?.[e.key_mode];
  if (isLive(marker, e.received_at, windowMs)) {
    if (e.dedupe.scope === 'request') {
      return marker.request_id === e.request_id ? { kind: 'same_request' } : { kind: 'duplicate', reason: 'duplicate_request' };
    }
    return { kind: 'duplicate', reason: 'duplicate' };
  }
  const next: DedupeState = { ...(state ?? {}), v: 1, [e.key_mode]: { first_seen: e.received_at, request_id: e.request_id } };
  return { kind: 'first', next };
}
