/**
 * The payload's well-known commerce fields (a platform record's `properties`, TikTok's properties object): only those
 * present with a plausible type. Everything else of the payload stays behind. The gateway types them on the envelope
 * (`commerce`), so a stage reads them without parsing the payload.
 */
import { COMMERCE_STRING_FIELDS, type Commerce, type EventEnvelope } from './envelope.js';

const MAX_CONTENTS = 100;

export function commerceFromPayload(payload: Readonly<Record<string, unknown>>): Commerce {
  const out: { -readonly [K in keyof Commerce]: Commerce[K] } = {};
  const value = typeof payload.value === 'string' && payload.value.trim() !== '' ? Number(payload.value) : payload.value;
  if (typeof value === 'number' && Number.isFinite(value)) out.value = value;
  for (const f of COMMERCE_STRING_FIELDS) {
    const v = payload[f];
    if (typeof v === 'string' && v !== '') out[f] = v;
  }
  if (Array.isArray(payload.contents)) out.contents = payload.contents.slice(0, MAX_CONTENTS);
  // The sender's own order or transaction id; the record's transaction_id is the spec's derived id.
  const order = payload.order_id ?? payload.transaction_id;
  if ((typeof order === 'string' && order !== '') || typeof order === 'number') out.order_id = String(order);
  return out;
}

/** The event's commerce fields: typed by the gateway; from the payload for an envelope written before they were. */
export function commerceOf(e: Pick<EventEnvelope, 'commerce' | 'payload'>): Commerce {
  return e.commerce ?? commerceFromPayload(e.payload);
}

/** A platform record's `properties`: the commerce fields, or nothing when there are none. */
export function propertiesOf(e: Pick<EventEnvelope, 'commerce' | 'payload'>): Record<string, unknown> | undefined {
  const c = commerceOf(e);
  return Object.keys(c).length > 0 ? { ...c } : undefined;
}
