/**
 * The enrich stage: events.deduped → conversions.ready, a batch at a time. The order of its steps, in one place:
 *   1. select-conversion   selected by the forwarding setup or a destination? consent to forward? test mode allowed?
 *   2. claim-event-ids     conversion-level dedup on event_id (claims in the stage's partition-local store)
 *   3. link-identities     every event: identity graph (the stage's partition-local state), as its consent allows;
 *                          the conversions' cluster reads
 *   4. build-conversion    attribution, personal data, page data, time zone → the platform record
 * Each step does its database work once for the whole batch (arrays in, one statement per step). Non-conversions
 * end as a drop with their reason, so every outcome is counted (stage_records_total). Erasure records (the erasure
 * job's, on the graph's partition) remove the person's clusters from the state.
 */
import { recordActivity, type ActivityCount } from '../domain/activity.js';
import { conversionKey } from '../domain/conversion.js';
import { checkEnvelope } from '../domain/envelope-guard.js';
import { eventIdOf } from '../domain/event-id.js';
import { Topics } from '../shared/topics.js';
import { dlq, drop, ok, StaleBatchError, type Outcome, type Stage } from '../stream/contract.js';
import { consentDecision } from './consent.js';
import { CLAIM_PREFIX, type EventIdClaim } from './event-id-claims.js';
import { erasedEnvelopes } from './identity/erasure-filter.js';
import { graphInputOf } from './identity/identifiers.js';
import type { EnrichItem } from './item.js';
import { scopeOf } from './scope.js';
import { createBuildConversionStep, type Convertible } from './steps/build-conversion.js';
import { createClaimEventIdsStep, firstOfEachEventId } from './steps/claim-event-ids.js';
import { createLinkIdentitiesStep } from './steps/link-identities.js';
import { createSelectConversionStep, type WorkspaceSelections } from './steps/select-conversion.js';
import { TtlCache } from './ttl-cache.js';
import { graphKey } from './identity/graph-repo.js';
import { EPHEMERAL_RETENTION, GraphState, type GraphEntry } from './identity/graph-state.js';
import type { BatchContext, InputRecord } from '../stream/contract.js';
import type { KeyValueStore } from '../stream/store.js';

export const ENRICH_STAGE = 'enrich';

export const ENRICH_DEFAULTS = {
  /** Stable identifiers (client ids, user ids, emails, phones) one identity cluster may hold. */
  maxClusterIdentifiers: 100,
  /** How long a conversion's event_id is remembered for conversion-level dedup. */
  conversionIdWindowMs: 7 * 24 * 3600_000,
  /** How long a forwarding setup or time zone may be served from memory. */
  settingsTtlMs: 1_000,
  /** Stable identifiers not seen for this long leave the graph (IDENTITY_GRAPH_RETENTION_DAYS). */
  graphRetentionMs: 180 * 24 * 3600_000,
} as const;

/** The stage's state store: the identity graph (identity/graph-state.ts) and the event-id claims (event-id-claims.ts). */
export const IDENTITY_STORE = 'identity';

export type EnrichEntry = GraphEntry | EventIdClaim;

export interface EnrichDeps {
  /**
   * A replay (services/replay) runs the stage again over events it saw before: their event ids were claimed then,
   * so it does not claim (the forwarder's sent ledger decides what goes again; within a batch the first of two
   * events with one id wins), and it leaves the Activity counts to the live pipeline.
   */
  readonly replay?: boolean;
  readonly maxClusterIdentifiers?: number;
  readonly conversionIdWindowMs?: number;
  readonly settingsTtlMs?: number;
  readonly graphRetentionMs?: number;
  /**
   * The dedupe stage's window (DEDUPE_WINDOW_HOURS): when it is at least the claim window, events that dedupe keyed
   * claim no event_id (steps/claim-event-ids.ts). Unset: every conversion claims.
   */
  readonly dedupeWindowMs?: number;
}

export function createEnrichProcessor(deps: EnrichDeps = {}): Stage<unknown, EnrichEntry> {
  const settingsTtlMs = deps.settingsTtlMs ?? ENRICH_DEFAULTS.settingsTtlMs;
  const windowMs = deps.conversionIdWindowMs ?? ENRICH_DEFAULTS.conversionIdWindowMs;
  const selectConversions = createSelectConversionStep({ setups: new TtlCache<WorkspaceSelections | null>(settingsTtlMs) });
  const graphRetentionMs = deps.graphRetentionMs ?? ENRICH_DEFAULTS.graphRetentionMs;
  const graphOptions = { maxClusterIdentifiers: deps.maxClusterIdentifiers ?? ENRICH_DEFAULTS.maxClusterIdentifiers, retentionMs: graphRetentionMs };
  const linkIdentities = createLinkIdentitiesStep(graphOptions);
  const claimDeduped = deps.dedupeWindowMs === undefined || deps.dedupeWindowMs < windowMs;
  const claimConversions = createClaimEventIdsStep({ claimDeduped });
  const buildConversions = createBuildConversionStep({ timeZones: new TtlCache<string>(settingsTtlMs) });

  /** The batch's events, between erasure records (processBatch below). */
  async function processEvents(records: readonly InputRecord<unknown>[], ctx: BatchContext<EnrichEntry>): Promise<Outcome[]> {
    const outcomes: Outcome[] = new Array(records.length);
    const checkedItems: EnrichItem[] = [];
    records.forEach((record, k) => {
      const checked = checkEnvelope(record.value);
      if (!checked.ok) {
        outcomes[k] = dlq('invalid_envelope', checked.reason);
        return;
      }
      const e = checked.envelope;
      const consent = consentDecision(e.consent);
      checkedItems.push({ position: k, record, e, consent, scope: scopeOf(e), graph: graphInputOf(e, consent) });
    });
    // An event of an erased person received before the erasure (in flight, or replayed) never re-links it. Checked
    // before the batch's transaction (an `ahead` batch), it is checked again in it: an erasure may have committed in
    // between, and the check there holds the erasure locks until the batch's writes commit.
    const envelopes = checkedItems.map((i) => i.e);
    const erased = await erasedEnvelopes(ctx.sql, envelopes);
    if (!ctx.inTransaction) {
      ctx.write(async (tx) => {
        const again = await erasedEnvelopes(tx, envelopes);
        if (again.some((x, n) => x !== erased[n])) throw new StaleBatchError('an erasure committed while the batch was processed');
      });
    }
    const items = checkedItems.filter((item, n) => {
      if (erased[n]) outcomes[item.position] = drop('erased');
      return !erased[n];
    });

    const selections = await selectConversions(ctx.sql, items);
    const candidates: Array<{ item: EnrichItem; n: number; selection: Convertible['selection']; eventId: string }> = [];
    items.forEach((item, n) => {
      const selection = selections[n]!;
      if (selection.kind === 'skip') outcomes[item.position] = drop(selection.reason);
      else candidates.push({ item, n, selection, eventId: eventIdOf(item.e) });
    });
    const claimed = deps.replay ? firstOfEachEventId(candidates) : await claimConversions(claimStore(ctx), candidates);
    const winners = candidates.filter((c, k) => {
      if (!claimed[k]) outcomes[c.item.position] = drop('duplicate_event_id');
      return claimed[k];
    });
    // Every drop is known now (what follows only builds conversions).
    if (!deps.replay) {
      const dropped = droppedConversions(items, outcomes);
      ctx.write((tx) => recordActivity(tx, dropped));
    }
    await buildConversions.prepare(ctx.sql, winners.map((c) => c.item));

    const reads = await linkIdentities(deps.replay ? { sql: ctx.sql } : { ...ctx, store: graphStore(ctx) }, items, selections);
    const won: Convertible[] = winners.map(({ item, n, selection, eventId }) => ({ item, selection, reads: reads[n]!, eventId }));
    const built = await buildConversions(ctx.sql, won);
    won.forEach((c, n) => {
      const conversion = built[n]!;
      outcomes[c.item.position] = ok({ topic: Topics.conversionsReady, key: conversionKey(conversion), value: conversion });
    });
    return outcomes;
  }

  /** An erasure record: the identifiers' clusters leave the state (a replay only skips it). */
  async function applyErasure(record: InputRecord<unknown>, ctx: BatchContext<EnrichEntry>): Promise<Outcome> {
    const checked = checkEnvelope(record.value);
    if (!checked.ok) return dlq('invalid_envelope', checked.reason);
    if (deps.replay) return drop('graph_erasure');
    const scope = scopeOf(checked.envelope);
    const keys = checked.envelope.graph_erasure!.node_keys;
    const state = await GraphState.loadKeys(graphStore(ctx), keys, graphOptions);
    state.erase(scope, keys);
    for (const changes of await state.save()) ctx.emit({ topic: Topics.identityChanges, key: graphKey(scope), value: changes });
    return drop('graph_erasure_applied');
  }

  return {
    name: ENRICH_STAGE,
    input: Topics.eventsDeduped,
    // Its writes are its store's, its emitted graph changes and ctx.write's (the Activity counts, the erasure check).
    ahead: true,
    ...(deps.replay
      ? {}
      : {
          store: {
            name: IDENTITY_STORE,
            changelog: Topics.identityState,
            retentionMs: graphRetentionMs,
            retentionByPrefix: { ...EPHEMERAL_RETENTION, [CLAIM_PREFIX]: windowMs },
          },
        }),
    async processBatch(records, ctx) {
      // Erasure records split the batch: what came before them is linked first, what comes after meets the erasure.
      const outcomes: Outcome[] = new Array(records.length);
      let start = 0;
      for (let i = 0; i <= records.length; i++) {
        if (i < records.length && !isErasureRecord(records[i]!.value)) continue;
        if (i > start) (await processEvents(records.slice(start, i), ctx)).forEach((o, k) => (outcomes[start + k] = o));
        if (i < records.length) outcomes[i] = await applyErasure(records[i]!, ctx);
        start = i + 1;
      }
      return outcomes;
    },
  };
}

/** The two views of the stage's store: their keys never meet (prefixes, event-id-claims.ts). */
const graphStore = (ctx: BatchContext<EnrichEntry>) => ctx.store as KeyValueStore<GraphEntry>;
const claimStore = (ctx: BatchContext<EnrichEntry>) => ctx.store as KeyValueStore<EventIdClaim>;

const isErasureRecord = (v: unknown): boolean => typeof v === 'object' && v !== null && (v as { graph_erasure?: unknown }).graph_erasure != null;

/**
 * The console's Activity counts of events that could have been conversions and were dropped, by reason (one
 * statement per batch). Events that are simply not selected for forwarding (page views...) are not counted there.
 */
function droppedConversions(items: readonly EnrichItem[], outcomes: ReadonlyArray<Outcome | undefined>): ActivityCount[] {
  const counts = new Map<string, { workspaceId: string; key: string; n: number }>();
  for (const item of items) {
    const o = outcomes[item.position];
    if (o?.type !== 'drop' || o.reason === 'not_selected') continue;
    const k = `${item.e.workspace_id}\n${o.reason}`;
    const c = counts.get(k);
    if (c) c.n++;
    else counts.set(k, { workspaceId: item.e.workspace_id, key: o.reason, n: 1 });
  }
  return [...counts.values()].map((c) => ({ ...c, kind: 'dropped' as const }));
}
