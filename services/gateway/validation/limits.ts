/** Request limits of the ingestion API (README "Limits"; docs/decisions.md says why these numbers). */
export const LIMITS = {
  /** Largest request body. Larger bodies get 413 from the Content-Length alone, or as soon as the stream passes it. */
  maxBodyBytes: 1024 * 1024,
  /** After a 413, how much more of the body is read (and discarded) so the client can read the answer. */
  maxDrainBytes: 32 * 1024 * 1024,
  /** Longest URL (path and query); longer: 414. Headers and request line together are limited to 16 KiB by Node. */
  maxUrlChars: 8 * 1024,
  /** Events per request, both endpoints. */
  maxEventsPerRequest: 500,
  /** Largest single event, as JSON. */
  maxEventBytes: 32 * 1024,
  /** Longest event name and idempotency key. */
  maxNameLength: 256,
  maxKeyLength: 256,
  /** Deepest nesting of arrays and objects in a body (the top-level array counts as 1). Checked without recursion. */
  maxJsonDepth: 32,
  /** Longest number literal in a body; numbers must also fit a 64-bit float (I-JSON, RFC 7493). */
  maxNumberChars: 100,
  /** Whole request, from its first byte to the answer (the spec's 1.5 s). */
  requestDeadlineMs: 1500,
  /** An event's own time (API-Version 2026-12-01) may be this much older than the request (the platform's window). */
  maxEventAgeMs: 7 * 24 * 3600 * 1000,
  /** ... and this much ahead of it (senders' clocks drift; a later time is a bug, e.g. milliseconds sent as seconds). */
  maxEventLeadMs: 5 * 60 * 1000,
} as const;
