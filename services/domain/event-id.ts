import canonicalizeModule from 'canonicalize';

// NOTE: canonicalize is CommonJS (`module.exports = fn`) while its types declare a default export.
const canonicalize = canonicalizeModule as unknown as (input: unknown) => string | undefined;
import type { EventEnvelope } from './envelope.js';
import { sha256Hex } from '../shared/ids.js';

/**
 * The spec's derived id for an event without an idempotency key: SHA-256 of the RFC 8785 canonical JSON of what
 * the sender sent about the event (name, payload, source, identifiers, consent), so the same payload always gives
 * the same id, whichever request carried it.
 */
export function derivedEventId(e: Pick<EventEnvelope, 'workspace_id' | 'name' | 'source' | 'payload' | 'identifiers' | 'consent'>): string {
  const canonical = canonicalize({
    name: e.name,
    source: e.source,
    payload: e.payload,
    identifiers: e.identifiers,
    consent: e.consent,
  });
  return sha256Hex(`${e.workspace_id}\n${canonical ?? ''}`);
}

/** The spec's event_id: the idempotency key when present, else the derived id. transaction_id is derived the same way. */
export function eventIdOf(e: EventEnvelope): string {
  return e.idempotency_key ?? derivedEventId(e);
}
