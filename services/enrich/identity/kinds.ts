/**
 * The node kinds of the identity graph and what each one is. `stable` kinds identify a person or a device for a
 * long time and count toward the cluster size cap; sessions and click ids are per visit, so a loyal visitor's many
 * sessions never look like a giant cluster. `merges`: seen together in an event, two such nodes join one cluster.
 * An organisation is shared by many people by design: it is linked by an edge but never merges person clusters.
 */
export const GRAPH_KINDS = [
  'user_id',
  'email_sha256',
  'email_canonical_sha256',
  'phone_e164_sha256',
  'phone_numeric_sha256',
  'client_id',
  'session_id',
  'ttclid',
  'fbclid',
  'gclid',
  'gbraid',
  'wbraid',
  'organization',
] as const;
export type GraphKind = (typeof GRAPH_KINDS)[number];

export interface KindRule {
  /** Personal data: linked only with ad_user_data GRANTED. */
  readonly personal: boolean;
  readonly stable: boolean;
  readonly merges: boolean;
  /** Holds a SHA-256 hex digest. */
  readonly hashed: boolean;
}

export const KIND_RULES: Readonly<Record<GraphKind, KindRule>> = {
  user_id: { personal: true, stable: true, merges: true, hashed: false },
  email_sha256: { personal: true, stable: true, merges: true, hashed: true },
  email_canonical_sha256: { personal: true, stable: true, merges: true, hashed: true },
  phone_e164_sha256: { personal: true, stable: true, merges: true, hashed: true },
  phone_numeric_sha256: { personal: true, stable: true, merges: true, hashed: true },
  client_id: { personal: false, stable: true, merges: true, hashed: false },
  session_id: { personal: false, stable: false, merges: true, hashed: false },
  ttclid: { personal: false, stable: false, merges: true, hashed: false },
  fbclid: { personal: false, stable: false, merges: true, hashed: false },
  gclid: { personal: false, stable: false, merges: true, hashed: false },
  gbraid: { personal: false, stable: false, merges: true, hashed: false },
  wbraid: { personal: false, stable: false, merges: true, hashed: false },
  organization: { personal: true, stable: false, merges: false, hashed: false },
};

/** Click ids: per visit, linked only with ad_storage consent for click ids. */
export const CLICK_KINDS: ReadonlySet<GraphKind> = new Set(['ttclid', 'fbclid', 'gclid', 'gbraid', 'wbraid']);

/** Resolution order: an event belongs to the cluster of its first identifier in this order (GRAPH_KINDS order). */
export const kindPriority = (k: GraphKind): number => GRAPH_KINDS.indexOf(k);

export const STABLE_KINDS: readonly GraphKind[] = GRAPH_KINDS.filter((k) => KIND_RULES[k].stable);

export interface GraphNode {
  readonly kind: GraphKind;
  readonly value: string;
}

export const nodeKey = (n: GraphNode): string => `${n.kind}\u0000${n.value}`;
