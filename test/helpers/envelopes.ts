/**
 * EventEnvelopes for stage tests, made the way the gateway makes them: request bodies from factories.ts through the
 * gateway's own normaliser, so a stage test never runs on an envelope the gateway would not write.
 */
import { randomUUID } from 'node:crypto';
import { normaliseEvent, normaliseSgtmEvent, type RequestContext } from '../../services/gateway/normalise.js';
import { envelopeKey, type EventEnvelope, type KeyMode } from '../../services/domain/envelope.js';
import { webEvent, type ServerEvent, type SgtmEvent, type WebEvent } from './factories.js';

/** 2025-03-01T12:00:00Z: a fixed receive time, so dates and windows in assertions are exact. */
export const T0 = Date.UTC(2025, 2, 1, 12, 0, 0);
export const DAY = 24 * 3600_000;

export interface CtxOver {
  workspaceId?: string;
  keyMode?: KeyMode;
  requestId?: string;
  receivedAt?: number;
}

const ctxOf = (o: CtxOver): RequestContext => ({
  workspaceId: o.workspaceId ?? 'ws_test',
  keyMode: o.keyMode ?? 'live',
  apiKeyId: `key_${o.keyMode ?? 'live'}`,
  requestId: o.requestId ?? randomUUID(),
  receivedAt: o.receivedAt ?? T0,
});

/** Endpoint A: one request carrying these events (WebEvent or ServerEvent bodies). */
export function fromA(events: ReadonlyArray<WebEvent | ServerEvent>, ctx: CtxOver = {}): EventEnvelope[] {
  const c = ctxOf(ctx);
  return events.map((e, i) => normaliseEvent(c, '2025-01-01', e, i));
}

/** Endpoint B: one request carrying these events, with an Idempotency-Key header or none. */
export function fromB(events: readonly SgtmEvent[], requestKey?: string, ctx: CtxOver = {}): EventEnvelope[] {
  const c = ctxOf(ctx);
  return events.map((e, i) => normaliseSgtmEvent(c, e, i, requestKey, events.length));
}

/** One web event of endpoint A as an envelope. */
export const webEnvelope = (over: Parameters<typeof webEvent>[0] = {}, ctx: CtxOver = {}): EventEnvelope => fromA([webEvent(over)], ctx)[0]!;

export const keyed = (e: EventEnvelope): { key: string; value: EventEnvelope } => ({ key: envelopeKey(e), value: e });
