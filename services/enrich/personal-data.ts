/**
 * user.email, user.phone and user.external_id: only when the setup's pii_mode is `hashed`, the event's
 * ad_user_data is GRANTED, and the identifiers exist in the event's identity cluster. Only SHA-256 hex digests
 * ever leave: emails and E.164 phones arrive hashed; a user id is hashed here (SHA-256 of the value as sent).
 */
import type { PiiMode } from '../domain/forwarding-setup.js';
import { sha256Hex } from '../shared/ids.js';
import type { ConsentDecision } from './consent.js';
import type { ClusterReader, OfferedNode } from './identity/graph-repo.js';
import type { GraphKind } from './identity/kinds.js';

export interface PersonalIdentifiers {
  readonly email?: readonly string[];
  readonly phone?: readonly string[];
  readonly external_id?: readonly string[];
}

/** Per list: the newest few are what the platform matches on; more only grows the record. */
export const MAX_PER_LIST = 5;
const SHA256_HEX = /^[0-9a-f]{64}$/;

/** Where a forwarded personal field came from: the graph node that supplied it (the "why" of the field). */
export interface PersonalSource {
  readonly field: 'user.email' | 'user.phone' | 'user.external_id';
  /** The value as forwarded (SHA-256 hex). */
  readonly value: string;
  readonly node_kind: string;
  readonly first_seen_at: number;
  readonly last_seen_at: number;
}

/** Why no personal data went, when none did. */
export type PersonalWithheld = 'pii_mode_none' | 'ad_user_data_not_granted' | 'no_cluster' | 'none_offered';

export interface ExplainedPersonalIdentifiers {
  readonly pii: PersonalIdentifiers;
  readonly sources: readonly PersonalSource[];
  readonly withheld: PersonalWithheld | null;
}

export function personalIdentifiers(
  graph: ClusterReader,
  consent: ConsentDecision,
  piiMode: PiiMode,
  clusterId: string | null,
): PersonalIdentifiers {
  return explainPersonalIdentifiers(graph, consent, piiMode, clusterId).pii;
}

const OFFERED_KINDS: readonly GraphKind[] = ['email_sha256', 'email_canonical_sha256', 'phone_e164_sha256', 'user_id'];
const EMAIL_KINDS: readonly GraphKind[] = ['email_sha256', 'email_canonical_sha256'];
const PHONE_KINDS: readonly GraphKind[] = ['phone_e164_sha256'];
const USER_ID_KINDS: readonly GraphKind[] = ['user_id'];

export function explainPersonalIdentifiers(
  graph: ClusterReader,
  consent: ConsentDecision,
  piiMode: PiiMode,
  clusterId: string | null,
): ExplainedPersonalIdentifiers {
  if (piiMode !== 'hashed') return { pii: {}, sources: [], withheld: 'pii_mode_none' };
  if (!consent.sendPersonalData) return { pii: {}, sources: [], withheld: 'ad_user_data_not_granted' };
  if (!clusterId) return { pii: {}, sources: [], withheld: 'no_cluster' };
  const nodes = graph.offeredIdentifiers(clusterId, OFFERED_KINDS, MAX_PER_LIST);
  const sources: PersonalSource[] = [];
  const out: { -readonly [K in keyof PersonalIdentifiers]: PersonalIdentifiers[K] } = {};
  const email = pick(nodes, sources, 'user.email', EMAIL_KINDS, false);
  const phone = pick(nodes, sources, 'user.phone', PHONE_KINDS, false);
  // A user id goes as the SHA-256 of the value as sent.
  const externalId = pick(nodes, sources, 'user.external_id', USER_ID_KINDS, true);
  if (email) out.email = email;
  if (phone) out.phone = phone;
  if (externalId) out.external_id = externalId;
  return { pii: out, sources, withheld: sources.length === 0 ? 'none_offered' : null };
}

/**
 * One field's list, in the nodes' order (newest first): each SHA-256 digest once, at most MAX_PER_LIST; what is not a
 * digest is never sent. Each value's source is the first node that gave it.
 */
function pick(
  nodes: readonly OfferedNode[],
  sources: PersonalSource[],
  field: PersonalSource['field'],
  kinds: readonly GraphKind[],
  hash: boolean,
): string[] | undefined {
  let values: string[] | undefined;
  for (const n of nodes) {
    if (!kinds.includes(n.kind)) continue;
    const value = hash ? sha256Hex(n.value) : n.value;
    if ((!hash && !SHA256_HEX.test(value)) || values?.includes(value)) continue;
    (values ??= []).push(value);
    sources.push({ field, value, node_kind: n.kind, first_seen_at: n.firstSeenAt, last_seen_at: n.lastSeenAt });
    if (values.length === MAX_PER_LIST) break;
  }
  return values;
}
