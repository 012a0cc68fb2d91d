/**
 * The TikTok kind (operator contract, "The platform side"): OAuth with refresh tokens, `event/track` with up to
 * 1,000 records of one event source, pixel and test code, the answer classified by classify.ts. Enrich already
 * builds the record in TikTok's shape under the spec's consent rules, so it goes as it is.
 */
import type { PlatformEventRecord } from '../../domain/conversion.js';
import type { ForwardingSetupInput } from '../../domain/forwarding-setup.js';
import { formatInTimeZone } from '../../enrich/time-zone.js';
import { classify } from '../classify.js';
import { parseTokenGrant } from '../platform-client.js';
import type { RefreshOutcome } from './sender.js';
import type { PlatformClient, TrackBody } from '../platform-client.js';
import type { BatchGroup, DestinationKind, Outgoing } from './kind.js';
import { halves } from './kind.js';
import { presentKeys, scoreMatch, type MatchScore, type MatchWeights } from './match-quality.js';

export const TIKTOK_BATCH_LIMIT = 1000;

export function trackBody(group: BatchGroup, batch: readonly Outgoing[]): TrackBody {
  return {
    event_source: group.eventSource,
    event_source_id: group.eventSourceId,
    ...(group.testEventCode === '' ? {} : { test_event_code: group.testEventCode }),
    data: batch.map((r) => r.record),
  };
}

/** Splits a rejected batch: the record the platform's message names (`data[i]…`) alone, else two halves. */
export function splitRejected<T>(batch: readonly T[], message: string): [T[], T[]] {
  const m = /\bdata\[(\d+)\]/.exec(message);
  const i = m ? Number(m[1]) : -1;
  if (i >= 0 && i < batch.length) return [[batch[i]!], [...batch.slice(0, i), ...batch.slice(i + 1)]];
  return halves(batch);
}

/**
 * TikTok's match keys (its Events API guidance: the click id first, then e-mail, phone and external id; the user
 * agent helps). The records carry no IP address, so none is scored.
 */
export const TIKTOK_MATCH_WEIGHTS: MatchWeights = { ttclid: 4, email: 2.5, phone: 2, external_id: 1, user_agent: 0.5 };

export function tiktokMatch(record: unknown): MatchScore {
  const u = ((record as { user?: unknown } | null)?.user ?? {}) as Record<string, unknown>;
  return scoreMatch(presentKeys(u), TIKTOK_MATCH_WEIGHTS);
}

export function tiktokKind(client: PlatformClient): DestinationKind<TrackBody> {
  return {
    name: 'tiktok',
    auth: 'oauth_refresh',
    batchLimit: TIKTOK_BATCH_LIMIT,
    consent: (record) => ({ send: true, record }),
    request: trackBody,
    payloads: (body) => body.data,
    match: tiktokMatch,
    send: (accessToken, body) => client.track(accessToken, body),
    classify,
    // The events API answers for the whole request: an ok takes every record of it.
    results: (batch) => batch.map(() => ({ outcome: 'sent' as const })),
    isolate: (batch, c) => splitRejected(batch, c.message),
  };
}

/**
 * A second (third…) TikTok destination: the same kind, under the destination's own setup (the body of
 * `PUT …/forwarding`) and ad account. Enrich built the record under the workspace's rules, so what differs per
 * destination is applied here: its `event_source`, `pii_mode: none` (no e-mail, phone or external id) and the
 * conversion time in its own advertiser's time zone.
 */
export function tiktokDestinationKind(
  client: PlatformClient,
  setup: Pick<ForwardingSetupInput, 'event_source' | 'pii_mode'>,
  timeZone: string | null,
): DestinationKind<TrackBody> {
  const kind = tiktokKind(client);
  const own = (record: PlatformEventRecord): PlatformEventRecord => {
    let r = record;
    if (setup.pii_mode === 'none' && r.user) {
      const { email: _e, phone: _p, external_id: _x, ...user } = r.user;
      r = { ...r, user };
    }
    if (timeZone !== null) r = { ...r, conversion_date_time: formatInTimeZone(r.event_time * 1000, timeZone) };
    return r;
  };
  return {
    ...kind,
    // Applied to the request, not the queued record: a dead letter keeps the conversion as enrich built it.
    request: (group, batch) => trackBody({ ...group, eventSource: setup.event_source }, batch.map((r) => ({ ...r, record: own(r.record) }))),
  };
}

/**
 * A TikTok destination's refresh: the rotated refresh token comes back with the access token. A token answer
 * (refresh token expired, invalid or revoked) means the grant is gone; anything else may pass (the platform, the
 * network, or the app's own credentials, which the operator fixes): tried again, as the workspace's refresher does.
 */
export async function refreshTiktok(client: PlatformClient, refreshToken: string): Promise<RefreshOutcome> {
  const answer = await client.refresh(refreshToken);
  const c = classify(answer);
  if (c.kind === 'ok') {
    const grant = parseTokenGrant(answer.data);
    if (typeof grant === 'string') return { error: grant, transient: true };
    return { accessToken: grant.accessToken, expiresIn: grant.expiresIn, ...(grant.refreshToken === undefined ? {} : { refreshToken: grant.refreshToken }) };
  }
  return { error: `${answer.code ?? answer.httpStatus} ${answer.message}`.trim(), transient: c.kind !== 'token' };
}
