/**
 * The platform record's `properties` (TikTok's properties object) from the event's payload: only well-known
 * commerce fields, only when present with a plausible type. Everything else of the payload stays behind.
 */
const STRING_FIELDS = ['currency', 'content_type', 'description', 'query'] as const;
const MAX_CONTENTS = 100;

export function propertiesOf(payload: Readonly<Record<string, unknown>>): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {};
  const value = typeof payload.value === 'string' && payload.value.trim() !== '' ? Number(payload.value) : payload.value;
  if (typeof value === 'number' && Number.isFinite(value)) out.value = value;
  for (const f of STRING_FIELDS) if (typeof payload[f] === 'string' && payload[f] !== '') out[f] = payload[f];
  if (Array.isArray(payload.contents)) out.contents = payload.contents.slice(0, MAX_CONTENTS);
  // The sender's own order or transaction id; the record's transaction_id is the spec's derived id.
  const order = payload.order_id ?? payload.transaction_id;
  if ((typeof order === 'string' && order !== '') || typeof order === 'number') out.order_id = String(order);
  return Object.keys(out).length > 0 ? out : undefined;
}
