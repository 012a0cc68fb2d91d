/** The forwarder's and the token refresher's metrics, registered in the service's one registry. */
import { Counter, Gauge, Histogram } from 'prom-client';
import { registry } from '../shared/metrics.js';

/**
 * Conversions by outcome: forwarded, retried (one count per record per retried attempt), dead_lettered, parked
 * (waiting for a connection), dropped (disconnected, expired, already sent); `code` is the platform code or the
 * reason.
 */
export const forwardedConversions = new Counter({
  name: 'forwarder_conversions_total',
  help: 'Conversions handled by the forwarder, by outcome and platform code (or reason); no per-workspace label (bounded series)',
  labelNames: ['outcome', 'code'] as const,
  registers: [registry],
});

export const platformLatency = new Histogram({
  name: 'forwarder_platform_request_duration_seconds',
  help: 'Latency of calls to the ad platform, by endpoint and outcome (platform code, http_<status>, timeout, network)',
  labelNames: ['endpoint', 'outcome'] as const,
  buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers: [registry],
});

export const endToEndLatency = new Histogram({
  name: 'forwarder_end_to_end_seconds',
  help: 'From the gateway receiving an event to the platform accepting its conversion',
  buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600],
  registers: [registry],
});

export const tokenRefreshes = new Counter({
  name: 'forwarder_token_refreshes_total',
  help: 'Access token refreshes by outcome (ok, invalid, transient, rejected, lease_lost)',
  labelNames: ['outcome'] as const,
  registers: [registry],
});
// Every outcome is exported from the start (at 0), so a failure ratio has a denominator before the first refresh.
for (const outcome of ['ok', 'invalid', 'transient', 'rejected', 'lease_lost']) tokenRefreshes.inc({ outcome }, 0);

export const outboxRecords = new Gauge({
  name: 'forwarder_outbox_records',
  help: 'Conversions waiting in the outbox: pending (connection connected) or parked (needs_reauth or not connected)',
  labelNames: ['state'] as const,
  registers: [registry],
});

export const revocations = new Counter({
  name: 'forwarder_token_revocations_total',
  help: 'Token revocation requests at disconnect by outcome (revoked, retry, gave_up)',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

/**
 * Connections taken out of sending by a fault of this deployment rather than the platform's answer, by reason
 * (`credentials_unreadable`: the stored tokens do not open with CREDENTIALS_KEY). Alert on any increase.
 */
export const connectionFaults = new Counter({
  name: 'forwarder_connection_faults_total',
  help: 'Connections parked by a deployment fault, by reason (credentials_unreadable)',
  labelNames: ['reason'] as const,
  registers: [registry],
});

/**
 * The workspace's other destinations (destinations/sender.ts), by destination kind, outcome and platform code:
 * `destination` is the kind (tiktok, meta, google), not the destination's id, so the series stay bounded.
 */
export const destinationConversions = new Counter({
  name: 'forwarder_destination_conversions_total',
  help: 'Conversions handled for destinations beyond the first TikTok one, by destination kind, outcome and platform code (or reason)',
  labelNames: ['destination', 'outcome', 'code'] as const,
  registers: [registry],
});
// Exported from the start (at 0), so the dashboard's panel and a ratio have series before the first delivery.
for (const destination of ['meta', 'google']) destinationConversions.inc({ destination, outcome: 'forwarded', code: '0' }, 0);

/**
 * The match quality (0–10, destinations/match-quality.ts) of each conversion a platform sent or refused, by
 * destination kind (tiktok, meta, google): bounded series.
 */
export const matchQuality = new Histogram({
  name: 'forwarder_match_quality',
  help: 'Match quality (0-10) of the conversions sent or refused, scored before sending, by destination kind',
  labelNames: ['destination'] as const,
  buckets: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
  registers: [registry],
});
