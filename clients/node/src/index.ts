/**
 * The sender kit for Node.js: normalise and hash identifiers, and send events to the ingestion service (endpoint A)
 * in batches with retries. README: clients/node/README.md.
 */
export { normalizeEmail, normalizePhone, hashEmail, hashPhone, hashedIdentifiers, InvalidIdentifierError } from './identifiers.js';
export {
  createClient,
  EventClient,
  DeliveryError,
  QueueFullError,
  API_VERSION,
  SERVICE_LIMITS,
  retryAfterMs,
  type ClientOptions,
  type ClientStats,
  type DeliveryFailure,
  type RetryOptions,
} from './client.js';
export type { Accepted, ApiVersion, EventInput, Problem, WireEvent } from './types.js';
