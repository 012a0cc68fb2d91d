/** The wire types of endpoint A, taken from the OpenAPI document (src/generated/openapi.ts, `npm run generate`). */
import type { paths } from './generated/openapi.js';

type EventsOperation = paths['/v1/events']['post'];

/** One event of endpoint A's request body, exactly as the service's OpenAPI document describes it. */
export type WireEvent = EventsOperation['requestBody']['content']['application/json'][number];
/** The 202 answer. */
export type Accepted = EventsOperation['responses'][202]['content']['application/json'];
/** An RFC 9457 problem document (every error of endpoint A). */
export type Problem = EventsOperation['responses'][400]['content']['application/problem+json'];
/** The API-Version this SDK speaks. */
export type ApiVersion = NonNullable<NonNullable<EventsOperation['parameters']['header']>['api-version']>;

/**
 * What `track()` takes: a wire event whose idempotency key may be left out (the client sets a random one, kept
 * across retries) and whose event time may also be a Date.
 */
export type EventInput = Omit<WireEvent, 'event_metadata' | 'event_time'> & {
  event_metadata: Omit<WireEvent['event_metadata'], 'idempotency_key'> & { idempotency_key?: string };
  /** When the event happened: a Date, an RFC 3339 string with offset, or Unix seconds. Default: when it arrives. */
  event_time?: Date | string | number;
};
