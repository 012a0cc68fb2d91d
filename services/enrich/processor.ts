/**
 * The enrich stage: events.deduped → conversions.ready. The order of its steps, in one place:
 *   1. update-graph        every event: identity graph, as its consent allows
 *   2. select-conversion   selected in the forwarding setup? consent to forward? test mode allowed?
 *   3. claim-event-id      conversion-level dedup on event_id
 *   4. build-conversion    attribution, personal data, page data, time zone → the platform record
 * Non-conversions end as a drop with their reason, so every outcome is counted (stage_records_total).
 */
import { conversionKey } from '../shared/conversion.js';
import { checkEnvelope } from '../shared/envelope-guard.js';
import { eventIdOf } from '../shared/event-id.js';
import type { ForwardingSetup } from '../shared/forwarding-setup.js';
import { dlq, drop, ok, type Processor } from '../stream/contract.js';
import { Topics } from '../shared/topics.js';
import { consentDecision } from './consent.js';
import { IdentityGraphRepo } from './identity/graph-repo.js';
import { createBuildConversionStep } from './steps/build-conversion.js';
import { createClaimEventIdStep } from './steps/claim-event-id.js';
import { createSelectConversionStep } from './steps/select-conversion.js';
import { createUpdateGraphStep } from './steps/update-graph.js';
import { TtlCache } from './ttl-cache.js';

export const ENRICH_STAGE = 'enrich';

export const ENRICH_DEFAULTS = {
  /** Stable identifiers (client ids, user ids, emails, phones) one identity cluster may hold. */
  maxClusterIdentifiers: 100,
  /** How long a conversion's event_id is remembered for conversion-level dedup. */
  conversionIdWindowMs: 7 * 24 * 3600_000,
  /** How long a forwarding setup or time zone may be served from memory. */
  settingsTtlMs: 1_000,
} as const;

export interface EnrichDeps {
  readonly maxClusterIdentifiers?: number;
  readonly conversionIdWindowMs?: number;
  readonly settingsTtlMs?: number;
}

export function createEnrichProcessor(deps: EnrichDeps = {}): Processor<unknown, never> {
  const settingsTtlMs = deps.settingsTtlMs ?? ENRICH_DEFAULTS.settingsTtlMs;
  const graph = new IdentityGraphRepo({ maxClusterIdentifiers: deps.maxClusterIdentifiers ?? ENRICH_DEFAULTS.maxClusterIdentifiers });
  const updateGraph = createUpdateGraphStep({ graph });
  const selectConversion = createSelectConversionStep({ setups: new TtlCache<ForwardingSetup | null>(settingsTtlMs) });
  const claimConversion = createClaimEventIdStep({ windowMs: deps.conversionIdWindowMs ?? ENRICH_DEFAULTS.conversionIdWindowMs });
  const buildConversion = createBuildConversionStep({ graph, timeZones: new TtlCache<string>(settingsTtlMs) });

  return {
    name: ENRICH_STAGE,
    input: Topics.eventsDeduped,
    async process(record, ctx) {
      const checked = checkEnvelope(record.value);
      if (!checked.ok) return dlq('invalid_envelope', checked.reason);
      const e = checked.envelope;
      const consent = consentDecision(e.consent);

      const identity = await updateGraph(e, consent, ctx.atomically);
      const selection = await selectConversion(e, consent, ctx.sql);
      if (selection.kind === 'skip') return drop(selection.reason);
      const eventId = eventIdOf(e);
      if (!(await claimConversion(e, eventId, record, ctx.sql))) return drop('duplicate_event_id');
      const { conversion } = await buildConversion(e, consent, selection, identity.resolved, eventId, ctx.sql);
      return ok({ topic: Topics.conversionsReady, key: conversionKey(conversion), value: conversion });
    },
  };
}
