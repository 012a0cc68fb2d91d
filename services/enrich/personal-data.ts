/**
 * user.email, user.phone and user.external_id: only when the setup's pii_mode is `hashed`, the event's
 * ad_user_data is GRANTED, and the identifiers exist in the event's identity cluster. Only SHA-256 hex digests
 * ever leave: emails and E.164 phones arrive hashed; a user id is hashed here (SHA-256 of the value as sent).
 */
import type { PiiMode } from '../domain/forwarding-setup.js';
import { sha256Hex } from '../shared/ids.js';
import type { ConsentDecision } from './consent.js';
import type { ClusterReader } from './identity/graph-repo.js';

export interface PersonalIdentifiers {
  readonly email?: readonly string[];
  readonly phone?: readonly string[];
  readonly external_id?: readonly string[];
}

/** Per list: the newest few are what the platform matches on; more only grows the record. */
export const MAX_PER_LIST = 5;
const SHA256_HEX = /^[0-9a-f]{64}$/;

function list(values: readonly string[]): readonly string[] | undefined {
  const digests = [...new Set(values)].filter((v) => SHA256_HEX.test(v)).slice(0, MAX_PER_LIST);
  return digests.length > 0 ? digests : undefined;
}

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

export function explainPersonalIdentifiers(
  graph: ClusterReader,
  consent: ConsentDecision,
  piiMode: PiiMode,
  clusterId: string | null,
): ExplainedPersonalIdentifiers {
  if (piiMode !== 'hashed') return { pii: {}, sources: [], withheld: 'pii_mode_none' };
  if (!consent.sendPersonalData) return { pii: {}, sources: [], withheld: 'ad_user_data_not_granted' };
  if (!clusterId) return { pii: {}, sources: [], withheld: 'no_cluster' };
  const nodes = graph.offeredIdentifiers(
    clusterId,
    ['email_sha256', 'email_canonical_sha256', 'phone_e164_sha256', 'user_id'],
    MAX_PER_LIST,
  );
  const sources: PersonalSource[] = [];
  const pick = (field: PersonalSource['field'], kinds: readonly string[], digest: (v: string) => string): readonly string[] | undefined => {
    // Each value digested once (a user id's SHA-256), not again per value looked up.
    const of = nodes.filter((n) => kinds.includes(n.kind)).map((n) => ({ n, digest: digest(n.value) }));
    const values = list(of.map((x) => x.digest));
    for (const value of values ?? []) {
      const { n } = of.find((x) => x.digest === value)!;
      sources.push({ field, value, node_kind: n.kind, first_seen_at: n.firstSeenAt, last_seen_at: n.lastSeenAt });
    }
    return values;
  };
  const out: { -readonly [K in keyof PersonalIdentifiers]: PersonalIdentifiers[K] } = {};
  const same = (v: string): string => v;
  const email = pick('user.email', ['email_sha256', 'email_canonical_sha256'], same);
  const phone = pick('user.phone', ['phone_e164_sha256'], same);
  const externalId = pick('user.external_id', ['user_id'], (v) => sha256Hex(v));
  if (email) out.email = email;
  if (phone) out.phone = phone;
  if (externalId) out.external_id = externalId;
  return { pii: out, sources, withheld: sources.length === 0 ? 'none_offered' : null };
}
