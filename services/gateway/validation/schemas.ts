/**
 * JSON Schemas of the two request variants, exactly as the spec's tables say, compiled once (ajv). Unknown
 * properties are ignored, not refused (see docs/decisions.md); every required field and every enum is enforced.
 */
import { LIMITS } from './limits.js';

const SHA256_PATTERN = '^[0-9a-fA-F]{64}$';
const sha256 = { type: 'string', pattern: SHA256_PATTERN } as const;
const nonEmpty = (max: number) => ({ type: 'string', minLength: 1, maxLength: max }) as const;
const consentValue = { type: 'string', enum: ['GRANTED', 'DENIED', 'UNSPECIFIED'] } as const;

/** Request schema of endpoint A, version 2026-11-01 (the spec as written). */
export const eventsSchemaV20261101 = {
  $id: 'events-2026-11-01',
  type: 'array',
  minItems: 1,
  maxItems: LIMITS.maxEventsPerRequest,
  items: {
    type: 'object',
    required: ['event_name', 'event_source', 'event_data', 'event_metadata'],
    properties: {
      event_name: nonEmpty(LIMITS.maxNameLength),
      event_source: { type: 'string', enum: ['WEB', 'SERVER'] },
      event_data: { type: 'object' },
      event_metadata: {
        type: 'object',
        required: ['idempotency_key', 'identifiers', 'consent'],
        properties: {
          idempotency_key: nonEmpty(LIMITS.maxKeyLength),
          identifiers: {
            type: 'object',
            properties: {
              user: nonEmpty(LIMITS.maxKeyLength),
              organization: nonEmpty(LIMITS.maxKeyLength),
              email: {
                type: 'object',
                required: ['sha256_email'],
                properties: { sha256_email: sha256, sha256_canonical: sha256 },
              },
              phone: {
                type: 'object',
                required: ['sha256_e164', 'sha256_e164_numeric'],
                properties: { sha256_e164: sha256, sha256_e164_numeric: sha256 },
              },
            },
          },
          consent: {
            type: 'object',
            required: ['analytics_storage', 'ad_storage', 'ad_user_data', 'ad_personalization'],
            properties: {
              analytics_storage: consentValue,
              ad_storage: consentValue,
              ad_user_data: consentValue,
              ad_personalization: consentValue,
            },
          },
        },
      },
    },
    // WEB needs a FrontendPayload; SERVER a BackendPayload (an object with no declared properties).
    if: { properties: { event_source: { const: 'WEB' } }, required: ['event_source'] },
    then: {
      properties: {
        event_data: {
          type: 'object',
          required: ['client_id', 'session_id', 'page_location', 'user_agent'],
          properties: {
            client_id: nonEmpty(LIMITS.maxKeyLength),
            session_id: nonEmpty(LIMITS.maxKeyLength),
            page_location: { type: 'string', minLength: 1, maxLength: 8192 },
            user_agent: { type: 'string', maxLength: 2048 },
            page_referrer: { type: 'string', maxLength: 8192 },
          },
        },
      },
    },
  },
} as const;

/** An event's own time (API-Version 2026-12-01); format and bounds are checked by validation/event-time.ts. */
const eventTime = {
  type: ['string', 'integer'],
  description:
    'API-Version 2026-12-01 and later: when the event happened, as an RFC 3339 date-time with offset or an integer of Unix seconds; at most 7 days before the request and 5 minutes after it. Becomes the forwarded event_time and conversion_date_time (default: when the service received it). Ignored under 2026-11-01.',
} as const;

/** Endpoint A, version 2026-12-01: 2026-11-01 plus an optional `event_time` on each event. */
export const eventsSchemaV20261201 = {
  ...eventsSchemaV20261101,
  $id: 'events-2026-12-01',
  items: {
    ...eventsSchemaV20261101.items,
    properties: { ...eventsSchemaV20261101.items.properties, event_time: eventTime },
  },
} as const;

/** Identifier elements of endpoint B: the known alias types need their value field; others are kept as given. */
const sgtmIdentifier = {
  type: 'object',
  required: ['alias_type'],
  properties: { alias_type: nonEmpty(64) },
  allOf: [
    {
      if: { required: ['alias_type'], properties: { alias_type: { const: 'client' } } },
      then: { required: ['anonymous_client_id'], properties: { anonymous_client_id: nonEmpty(LIMITS.maxKeyLength) } },
    },
    {
      if: { required: ['alias_type'], properties: { alias_type: { const: 'user' } } },
      then: { required: ['user_id'], properties: { user_id: nonEmpty(LIMITS.maxKeyLength) } },
    },
    {
      if: { required: ['alias_type'], properties: { alias_type: { const: 'email' } } },
      then: { required: ['hashed_email'], properties: { hashed_email: sha256 } },
    },
  ],
} as const;

export const sgtmSchema = {
  $id: 'sgtm',
  type: 'array',
  minItems: 1,
  maxItems: LIMITS.maxEventsPerRequest,
  items: {
    type: 'object',
    required: ['event_name', 'event_payload', 'event_metadata'],
    properties: {
      event_name: nonEmpty(LIMITS.maxNameLength),
      event_payload: { type: 'object' },
      event_metadata: {
        type: 'object',
        required: ['consent', 'identifiers'],
        properties: {
          consent: {
            type: 'object',
            required: ['analytics_storage', 'ad_storage', 'ad_user_data', 'ad_personalization'],
            properties: {
              analytics_storage: { type: 'boolean' },
              ad_storage: { type: 'boolean' },
              ad_user_data: { type: 'boolean' },
              ad_personalization: { type: 'boolean' },
            },
          },
          identifiers: { type: 'array', maxItems: 50, items: sgtmIdentifier },
        },
      },
    },
  },
} as const;

/**
 * Endpoint B, version 2026-12-01: an optional `event_metadata.event_time` on each event, and the `phone` alias type
 * (`hashed_phone`: SHA-256 of E.164 with the `+`; optional `hashed_phone_numeric`: without it), which older versions
 * keep as an unknown alias.
 */
export const sgtmSchemaV20261201 = {
  ...sgtmSchema,
  $id: 'sgtm-2026-12-01',
  items: {
    ...sgtmSchema.items,
    properties: {
      ...sgtmSchema.items.properties,
      event_metadata: {
        ...sgtmSchema.items.properties.event_metadata,
        properties: {
          ...sgtmSchema.items.properties.event_metadata.properties,
          event_time: eventTime,
          identifiers: {
            ...sgtmSchema.items.properties.event_metadata.properties.identifiers,
            items: {
              ...sgtmIdentifier,
              allOf: [
                ...sgtmIdentifier.allOf,
                {
                  if: { required: ['alias_type'], properties: { alias_type: { const: 'phone' } } },
                  then: { required: ['hashed_phone'], properties: { hashed_phone: sha256, hashed_phone_numeric: sha256 } },
                },
              ],
            },
          },
        },
      },
    },
  },
} as const;

export { SHA256_PATTERN };
