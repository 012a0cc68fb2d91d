/**
 * user.email, user.phone and user.external_id: only when the setup's pii_mode is `hashed`, the event's
 * ad_user_data is GRANTED, and the identifiers exist in the event's identity cluster. Only SHA-256 hex digests
 * ever leave: emails and E.164 phones arrive hashed; a user id is hashed here (SHA-256 of the value as sent).
 */
import type { PiiMode } from '../shared/forwarding-setup.js';
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

export function personalIdentifiers(
  graph: ClusterReader,
  consent: ConsentDecision,
  piiMode: PiiMode,
  clusterId: string | null,
): PersonalIdentifiers {
  if (piiMode !== 'hashed' || !consent.sendPersonalData || !clusterId) return {};
  const nodes = graph.identifiers(
    clusterId,
    ['email_sha256', 'email_canonical_sha256', 'phone_e164_sha256', 'user_id'],
    MAX_PER_LIST,
  );
  const of = (...kinds: string[]) => nodes.filter((n) => kinds.includes(n.kind)).map((n) => n.value);
  const out: { -readonly [K in keyof PersonalIdentifiers]: PersonalIdentifiers[K] } = {};
  const email = list(of('email_sha256', 'email_canonical_sha256'));
  const phone = list(of('phone_e164_sha256'));
  const externalId = list(of('user_id').map((v) => sha256Hex(v)));
  if (email) out.email = email;
  if (phone) out.phone = phone;
  if (externalId) out.external_id = externalId;
  return out;
}
