/**
 * Erasure, store by store (docs/privacy.md, "Erasure"): a list of steps, each `{ store, run(tx, subject) → removed }`,
 * run in order in ONE transaction by the erasure job (erasures.ts). A store added later is one more step in
 * `erasureSteps`.
 *
 * The subject starts as the identifiers of the request; the identity-graph step widens it to the person's whole
 * cluster (every identifier linked to them), so the steps after it find the person's data by any of them.
 */
import type { Sql } from '../shared/db/db.js';
import { sha256Hex } from '../shared/ids.js';
import { graphOwnerKey, type EventEnvelope } from '../domain/envelope.js';
import { Topics, type TopicName } from '../shared/topics.js';
import { deleteEdges, deleteNodes, personNodes } from '../enrich/identity/erase.js';
import { nodeIdOf } from '../enrich/identity/graph-repo.js';
import { nodeStoreKey } from '../enrich/identity/graph-state.js';
import { GRAPH_SINK_STAGE } from '../enrich/identity/graph-sink.js';
import { marksOf, saltedHash, workspaceSalt } from '../enrich/identity/erasure-filter.js';
import type { GraphNode } from '../enrich/identity/kinds.js';

export interface ErasureSubject {
  readonly erasureId: string;
  readonly workspaceId: string;
  /** Epoch ms of the request: envelopes received up to then are the person's past. */
  readonly requestedAt: number;
  /** The person's identifiers: the request's, widened to their cluster by the identity-graph step. */
  nodes: readonly GraphNode[];
}

export interface ErasureStep {
  readonly store: string;
  run(tx: Sql, subject: ErasureSubject): Promise<number>;
}

/** The values a record or an envelope would carry them as. */
function matchParams(nodes: readonly GraphNode[]) {
  const of = (...kinds: string[]) => nodes.filter((n) => kinds.includes(n.kind)).map((n) => n.value);
  return {
    emails: of('email_sha256', 'email_canonical_sha256'),
    phones: of('phone_e164_sha256', 'phone_numeric_sha256'),
    // user.external_id is the SHA-256 of the user id (enrich/personal-data.ts).
    externalIds: of('user_id').map((v) => sha256Hex(v)),
    ttclids: of('ttclid'),
    envelopeKeys: nodes.filter((n) => !['client_id', 'session_id', 'ttclid'].includes(n.kind)).map((n) => `${n.kind}\n${n.value}`),
    clientIds: of('client_id'),
    sessionIds: of('session_id'),
    clickPatterns: of('ttclid').map((v) => `%ttclid=${v.replace(/[\\%_]/g, (c) => `\\${c}`)}%`),
  };
}

/**
 * A platform record (forwarded or queued) that carries one of the person's identifiers. Parameters $2..$5. `col` is a
 * jsonb expression: the tables that keep records as json (migration 0016; the log on PGlite, 0020) pass theirs cast.
 */
const recordMatches = (col: string): string =>
  `(COALESCE(${col}->'user'->'email', '[]'::jsonb) ?| $2::text[] OR COALESCE(${col}->'user'->'phone', '[]'::jsonb) ?| $3::text[]
    OR COALESCE(${col}->'user'->'external_id', '[]'::jsonb) ?| $4::text[] OR ${col}->'user'->>'ttclid' = ANY($5::text[]))`;

/** An envelope that carries one of the person's identifiers. Parameters $6..$9. */
const envelopeMatches = (col: string): string =>
  `(EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(${col}->'identifiers') = 'array' THEN ${col}->'identifiers' ELSE '[]'::jsonb END) AS i
            WHERE (i->>'kind') || E'\\n' || (i->>'value') = ANY($6::text[]))
    OR ${col}->'session'->>'client_id' = ANY($7::text[]) OR ${col}->'session'->>'session_id' = ANY($8::text[])
    OR ${col}->'session'->>'page_location' LIKE ANY($9::text[]))`;

function params(s: ErasureSubject): unknown[] {
  const p = matchParams(s.nodes);
  return [s.workspaceId, p.emails, p.phones, p.externalIds, p.ttclids, p.envelopeKeys, p.clientIds, p.sessionIds, p.clickPatterns];
}

const count = async (tx: Sql, text: string, values: unknown[]): Promise<number> => (await tx.query(text, values)).rows.length;

/** The identity graph: the person's clusters (widening the subject), then their nodes. */
export const identityGraphStep: ErasureStep = {
  store: 'identity_graph',
  async run(tx, s) {
    s.nodes = await personNodes(tx, s.workspaceId, s.nodes);
    return deleteNodes(tx, s.workspaceId, s.nodes);
  },
};

/** The graph's links (edges) that touch one of the person's identifiers. */
export const identityLinksStep: ErasureStep = {
  store: 'identity_links',
  run: (tx, s) => deleteEdges(tx, s.workspaceId, s.nodes),
};

/** Conversions of the person still waiting to be sent (queued or parked). */
export const outboxStep: ErasureStep = {
  store: 'outbox',
  async run(tx, s) {
    const p = params(s).slice(0, 5);
    const queued = await count(tx, `DELETE FROM forward_outbox WHERE workspace_id = $1 AND ${recordMatches('record::jsonb')} RETURNING id`, p);
    // The workspace's other destinations queue copies of their own (forwarder/destinations).
    const forDestinations = await count(tx, `DELETE FROM destination_outbox WHERE workspace_id = $1 AND ${recordMatches('record::jsonb')} RETURNING id`, p);
    return queued + forDestinations;
  },
};

/**
 * Dead letters: the per-workspace list (table dead_letters, both runtimes: what the admin API lists and redrives)
 * and the copies in the database log (events.dlq and conversions.dlq rows: the embedded runtime's topics, and on
 * Kafka the conversions.dlq rows the relay publishes from; events.dlq on the broker: docs/privacy.md). A letter's
 * value holds the envelope (`value.value`) or the platform record (`value.record`, `value.value.record`).
 */
export const deadLettersStep: ErasureStep = {
  store: 'dead_letters',
  async run(tx, s) {
    const letterMatches = (value: string) =>
      `(${envelopeMatches(`${value}->'value'`)} OR ${recordMatches(`${value}->'record'`)} OR ${recordMatches(`${value}->'value'->'record'`)})`;
    const listed = await count(tx, `DELETE FROM dead_letters WHERE workspace_id = $1 AND ${letterMatches('value')} RETURNING id`, params(s));
    const logged = await count(
      tx,
      `DELETE FROM log_records WHERE topic = ANY($10::text[])
         AND COALESCE(value->>'workspace_id', value->'value'->>'workspace_id') = $1 AND ${letterMatches('(value::jsonb)')}
       RETURNING "offset"`,
      [...params(s), [Topics.eventsDlq, Topics.conversionsDlq]],
    );
    // A letter is in both places on the embedded runtime (and conversions.dlq on Kafka): count letters, not copies.
    return Math.max(listed, logged);
  },
};

/**
 * The embedded runtime's log: the person's envelopes received up to the request (events.raw, events.deduped), their
 * conversions (conversions.ready), and the identity-graph changes that name them once the graph sink applied them
 * (identity.graph-changes; one not yet applied also holds others' changes: the sink applies it, then the erasure's own
 * changes delete the person's rows). On Kafka these topics live on the broker: the redaction list covers them.
 */
export const eventLogStep: ErasureStep = {
  store: 'event_log',
  async run(tx, s) {
    const envelopes = await count(
      tx,
      `DELETE FROM log_records WHERE value->>'workspace_id' = $1 AND (
         (topic = ANY($10::text[]) AND (value->>'received_at')::float8 <= $11 AND ${envelopeMatches('(value::jsonb)')})
         OR (topic = $12 AND ${recordMatches("(value::jsonb)->'record'")}))
       RETURNING "offset"`,
      [...params(s), [Topics.eventsRaw, Topics.eventsDeduped], s.requestedAt, Topics.conversionsReady],
    );
    const changes = await count(
      tx,
      `DELETE FROM log_records l WHERE l.topic = $2 AND l.value->>'workspace_id' = $1
         AND l."offset" <= COALESCE((SELECT c."offset" FROM consumer_offsets c WHERE c.group_id = $3 AND c.topic = $2), 0)
         AND (EXISTS (SELECT 1 FROM jsonb_array_elements((l.value::jsonb)->'nodes') AS n(row) WHERE (n.row->>'kind') || E'\\n' || (n.row->>'value') = ANY($4::text[]))
              OR EXISTS (SELECT 1 FROM jsonb_array_elements(COALESCE((l.value::jsonb)->'sightings', '[]'::jsonb)) AS n(row) WHERE n.row->>'node_id' = ANY($5::text[])))
       RETURNING l."offset"`,
      [
        s.workspaceId,
        Topics.identityChanges,
        GRAPH_SINK_STAGE,
        s.nodes.map((n) => `${n.kind}\n${n.value}`),
        // A sighting names its node by id alone, which also depends on the key mode.
        (['live', 'test'] as const).flatMap((keyMode) => s.nodes.map((n) => nodeIdOf({ workspaceId: s.workspaceId, keyMode }, n))),
      ],
    );
    return envelopes + changes;
  },
};

/** The "why this field" records of the person's conversions. */
export const explanationsStep: ErasureStep = {
  store: 'why_records',
  run: (tx, s) =>
    count(tx, `DELETE FROM conversion_explanations WHERE workspace_id = $1 AND ${recordMatches('record::jsonb')} RETURNING event_id`, params(s).slice(0, 5)),
};

/** The delivery records of the person's conversions, every destination's (their payloads carry the identifiers). */
export const deliveriesStep: ErasureStep = {
  store: 'deliveries',
  run: (tx, s) => count(tx, `DELETE FROM deliveries WHERE workspace_id = $1 AND ${recordMatches('record::jsonb')} RETURNING id`, params(s).slice(0, 5)),
};

/** The redaction list: the person's identifiers, salted-hashed, for replays and exports of the raw log. */
export const redactionListStep: ErasureStep = {
  store: 'redaction_list',
  async run(tx, s) {
    const salt = await workspaceSalt(tx, s.workspaceId);
    const hashes = [...new Set(marksOf(s.nodes).map((m) => saltedHash(salt, m)))];
    await tx.query(
      `INSERT INTO erased_identifiers (workspace_id, id_hash, erased_at, erasure_id)
       SELECT $1, h, to_timestamp($3 / 1000.0), $4 FROM unnest($2::text[]) AS h
       ON CONFLICT (workspace_id, id_hash) DO UPDATE SET erased_at = GREATEST(erased_identifiers.erased_at, EXCLUDED.erased_at), erasure_id = EXCLUDED.erasure_id`,
      [s.workspaceId, hashes, s.requestedAt, s.erasureId],
    );
    return hashes.length;
  },
};

/** How the erasure reaches enrich's own state: an erasure record on events.deduped (the runtime's log). */
export interface GraphErasureLog {
  /** Appends within `tx`, or makes the records durable before `tx` commits (datateam/redrive.ts RedriveLog). */
  reappend(tx: Sql, topic: TopicName, records: ReadonlyArray<{ key: string; value: unknown }>): Promise<void>;
}

/**
 * Enrich's partition-local graph (enrich/identity/graph-state.ts): an erasure record per key mode, keyed like the
 * graph's events so it reaches the partition that owns the graph, after every event already there. Enrich removes the
 * person's clusters from its state and changelog, and the graph sink deletes what the tables got meanwhile. Counts
 * the identifiers named (by key: the records carry no identifier).
 */
export function identityStateStep(log: GraphErasureLog): ErasureStep {
  return {
    store: 'identity_state',
    async run(tx, s) {
      const records = (['live', 'test'] as const).map((key_mode) => {
        const e: EventEnvelope = {
          v: 1,
          workspace_id: s.workspaceId,
          key_mode,
          api_key_id: 'erasure',
          request_id: s.erasureId,
          index: 0,
          received_at: Math.floor(s.requestedAt),
          endpoint: 'events',
          api_version: null,
          idempotency_key: null,
          dedupe: null,
          source: null,
          name: '$graph_erasure',
          consent: { analytics_storage: 'UNSPECIFIED', ad_storage: 'UNSPECIFIED', ad_user_data: 'UNSPECIFIED', ad_personalization: 'UNSPECIFIED' },
          identifiers: [],
          session: null,
          payload: {},
          graph_erasure: { erasure_id: s.erasureId, node_keys: s.nodes.map((n) => nodeStoreKey({ workspaceId: s.workspaceId, keyMode: key_mode }, n)) },
        };
        return { key: graphOwnerKey(e), value: e };
      });
      await log.reappend(tx, Topics.eventsDeduped, records);
      return s.nodes.length;
    },
  };
}

/** The steps in order for a runtime. The graph step comes first: it widens the subject for the others. */
export function erasureSteps(runtime: 'embedded' | 'kafka', graphLog: GraphErasureLog): readonly ErasureStep[] {
  return [
    identityGraphStep,
    identityLinksStep,
    outboxStep,
    deadLettersStep,
    ...(runtime === 'embedded' ? [eventLogStep] : []),
    explanationsStep,
    deliveriesStep,
    redactionListStep,
    identityStateStep(graphLog),
  ];
}
