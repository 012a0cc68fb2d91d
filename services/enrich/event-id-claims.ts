/**
 * Conversion-level dedup on event_id: the first conversion per (workspace, key mode, event_id) claims the id in the
 * stage's partition-local store, later ones are dropped (endpoint B's repeats without an Idempotency-Key). One
 * partition sees every claim of an id, and a claim commits with the conversion it lets through, so a batch processed
 * again finds no claim of its own. Claims age out after the window (CLAIM_PREFIX's retention).
 */
import type { KeyValueStore } from '../stream/store.js';
import type { GraphScope } from './identity/graph-repo.js';

/** A claimed event id: when its first conversion was received. */
export interface EventIdClaim {
  readonly claimed_at: number;
}

export interface Claim {
  readonly scope: GraphScope;
  readonly eventId: string;
  readonly at: number;
}

/** Store keys of claims: apart from the identity graph's (one letter a node kind, `c` its clusters). */
export const CLAIM_PREFIX = 'v\u001f';

const claimKey = (c: Claim): string => `${CLAIM_PREFIX}${c.scope.workspaceId}\u001f${c.scope.keyMode}\u001f${c.eventId}`;

export const isEventIdClaim = (v: object): v is EventIdClaim => 'claimed_at' in v;

/**
 * Claims the event ids in order, with one read of the store for the batch: true where this conversion is the id's
 * first. Within the batch, the first of two conversions with one id wins, as one at a time would.
 */
export async function claimEventIds(store: KeyValueStore<EventIdClaim>, claims: readonly Claim[]): Promise<boolean[]> {
  if (claims.length === 0) return [];
  const keys = claims.map(claimKey);
  const prior = await store.getMany([...new Set(keys)]);
  const taken = new Set(prior.keys());
  const won = keys.map((k) => {
    if (taken.has(k)) return false;
    taken.add(k);
    return true;
  });
  await Promise.all(keys.flatMap((k, n) => (won[n] ? [store.put(k, { claimed_at: claims[n]!.at })] : [])));
  return won;
}
