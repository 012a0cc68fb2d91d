/**
 * Which of an event's identifiers enter the identity graph: consent first (consent.ts), then a junk filter, since
 * one shared junk value ("undefined", the hash of an empty email) would otherwise link every user who sends it.
 */
import { clickIdsOf } from '../../domain/click-id.js';
import type { EventEnvelope, IdentifierKind } from '../../domain/envelope.js';
import { sha256Hex } from '../../shared/ids.js';
import type { ConsentDecision } from '../consent.js';
import { CLICK_KINDS, KIND_RULES, kindPriority, nodeKey, type GraphKind, type GraphNode } from './kinds.js';

export type SkipReason = 'consent_ad_storage' | 'consent_ad_user_data' | 'junk' | 'unsupported_kind';

const MAX_VALUE_LENGTH = 512;
const SHA256_HEX = /^[0-9a-f]{64}$/;

/** Placeholders that senders put where they have no value. Compared lower-cased and trimmed. */
const JUNK_VALUES: readonly string[] = [
  '', 'undefined', 'null', 'none', 'nil', 'nan', 'unknown', 'anonymous', 'guest', '(not set)', 'not set',
  'n/a', 'na', '0', '-1', 'false', 'true', '[object object]', '{}', '[]',
];
const JUNK = new Set(JUNK_VALUES);
/** The same placeholders hashed (the sender hashed an empty or placeholder email/phone). */
const JUNK_HASHES = new Set(JUNK_VALUES.map((v) => sha256Hex(v)));

export function isJunk(kind: GraphKind, value: string): boolean {
  if (value.length > MAX_VALUE_LENGTH) return true;
  if (KIND_RULES[kind].hashed) return !SHA256_HEX.test(value) || JUNK_HASHES.has(value);
  return JUNK.has(value.trim().toLowerCase());
}

const FROM_ENVELOPE: Partial<Record<IdentifierKind, GraphKind>> = {
  client_id: 'client_id',
  user_id: 'user_id',
  organization: 'organization',
  email_sha256: 'email_sha256',
  email_canonical_sha256: 'email_canonical_sha256',
  phone_e164_sha256: 'phone_e164_sha256',
  phone_numeric_sha256: 'phone_numeric_sha256',
};

export interface GraphInput {
  /** Distinct nodes, highest resolution priority first. */
  readonly nodes: readonly GraphNode[];
  readonly skipped: ReadonlyArray<{ readonly kind: string; readonly reason: SkipReason }>;
  /**
   * Consent withdrawal (docs/consent.md): the identifiers its consent kept out of the graph (not junk). They are
   * never stored or linked; they only find the clusters that this event's withheld consent applies to.
   */
  readonly withheld: readonly GraphNode[];
}

/** Every identifier of the event as graph nodes, consent aside, junk left out (what an erasure filter matches). */
export function identifierNodesOf(e: EventEnvelope): GraphNode[] {
  return candidates(e).nodes.filter((n) => !isJunk(n.kind, n.value));
}

/** Every identifier the event carries, as graph nodes, before any rule. */
function candidates(e: EventEnvelope): { nodes: GraphNode[]; unsupported: string[] } {
  const nodes: GraphNode[] = [];
  const unsupported: string[] = [];
  for (const id of e.identifiers) {
    const kind = FROM_ENVELOPE[id.kind];
    if (kind) nodes.push({ kind, value: id.value });
    // Unknown alias types of endpoint B: their meaning (and whether they are personal data) is unknown.
    else unsupported.push(id.alias ?? id.kind);
  }
  if (e.session?.client_id) nodes.push({ kind: 'client_id', value: e.session.client_id });
  // NOTE: a session id is no node. It is unique only within its client: GA4's `ga_session_id` (what the server-side
  // tag sends) is the second the session began, shared by everyone who arrived in that second, so as a node it fused
  // strangers' clusters. Scoped by its client id it would link nothing the client id does not (a web event always
  // carries both), and cost a state entry, a row and an edge per visit (docs/decisions.md).
  for (const [kind, value] of Object.entries(clickIdsOf(e))) nodes.push({ kind: kind as GraphKind, value });
  return { nodes, unsupported };
}

export function graphInputOf(e: EventEnvelope, consent: ConsentDecision): GraphInput {
  const { nodes, unsupported } = candidates(e);
  const skipped: Array<{ kind: string; reason: SkipReason }> = unsupported.map((kind) => ({ kind, reason: 'unsupported_kind' }));
  const kept = new Map<string, GraphNode>();
  const withheld = new Map<string, GraphNode>();
  for (const n of nodes) {
    if (!consent.graph || (CLICK_KINDS.has(n.kind) && !consent.clickIds)) skipped.push({ kind: n.kind, reason: 'consent_ad_storage' });
    else if (KIND_RULES[n.kind].personal && !consent.personalData) skipped.push({ kind: n.kind, reason: 'consent_ad_user_data' });
    else if (isJunk(n.kind, n.value)) {
      skipped.push({ kind: n.kind, reason: 'junk' });
      continue;
    } else {
      kept.set(nodeKey(n), n);
      continue;
    }
    if (!isJunk(n.kind, n.value)) withheld.set(nodeKey(n), n);
  }
  const ordered = [...kept.values()].sort((a, b) => kindPriority(a.kind) - kindPriority(b.kind) || (a.value < b.value ? -1 : 1));
  return { nodes: ordered, skipped, withheld: [...withheld.values()] };
}

/** Last seen page data of the event, kept on its nodes for server events of the same person. */
export interface PageData {
  readonly page_location: string | null;
  readonly user_agent: string | null;
}

export function pageDataOf(e: EventEnvelope): PageData | null {
  const page_location = e.session?.page_location || null;
  const user_agent = e.session?.user_agent || null;
  return page_location || user_agent ? { page_location, user_agent } : null;
}
