/**
 * Attribution, in the spec's order: the event's own click id (ttclid in its page URL); else the newest click id of
 * its identity cluster first seen within click_window_days before the event; else an enhanced conversion (no click
 * id, the graph's hashed identifiers when allowed: personal-data.ts). Hashed identifiers are sent whenever allowed,
 * with or without a click id: the platform matches on both.
 */
import { clickIdsOf } from '../domain/click-id.js';
import type { EventEnvelope } from '../domain/envelope.js';
import type { ConsentDecision } from './consent.js';
import type { ClusterReader } from './identity/graph-repo.js';
import { isJunk } from './identity/identifiers.js';

export type { AttributionKind } from '../domain/conversion.js';

const DAY_MS = 24 * 3600_000;

export function findClickId(
  graph: ClusterReader,
  e: EventEnvelope,
  consent: ConsentDecision,
  clusterId: string | null,
  clickWindowDays: number,
): { ttclid?: string; kind?: 'event_click' | 'graph_click' } {
  if (!consent.clickIds) return {};
  const own = clickIdsOf(e).ttclid;
  if (own && !isJunk('ttclid', own)) return { ttclid: own, kind: 'event_click' };
  if (!clusterId) return {};
  const fromGraph = graph.newestClickId(clusterId, e.received_at, clickWindowDays * DAY_MS);
  return fromGraph ? { ttclid: fromGraph, kind: 'graph_click' } : {};
}
