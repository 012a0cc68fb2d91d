/**
 * Enrich works a batch at a time (one load, one write of the identity graph, one claim statement); its results must
 * be exactly those of the same events applied one by one. A seeded stream of events over a small pool of identifiers
 * (merges, cap refusals, page data, click ids, consent withheld, test-mode traffic, repeated event ids, times out of
 * order) is run once in batches of one and again in larger batches, on two stores: outcomes, conversions and the
 * graph's tables must be equal.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prng } from '../../test/helpers/prng.js';
import type { Db } from '../shared/db/db.js';
import type { EventEnvelope } from '../domain/envelope.js';
import { openDatabase } from '../shared/db/open.js';
import { writeForwardingSetup } from '../domain/forwarding-setup.js';
import type { Outcome } from '../stream/contract.js';
import { sha256, type ServerEvent, type WebEvent } from '../../test/helpers/factories.js';
import { DAY, T0, fromA } from '../../test/helpers/envelopes.js';
import { processAll } from '../../test/helpers/stage-harness.js';
import { SETUP } from '../../test/helpers/workspaces.js';
import { createEnrichProcessor } from './processor.js';

const WS = 'ws_equivalence';

function stream(seed: number, n: number): EventEnvelope[] {
  const r = prng(seed);
  const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const maybe = (p: number) => r() < p;
  const consent = () => ({
    analytics_storage: 'GRANTED' as const,
    ad_storage: maybe(0.9) ? ('GRANTED' as const) : ('DENIED' as const),
    ad_user_data: maybe(0.75) ? ('GRANTED' as const) : pick(['DENIED', 'UNSPECIFIED'] as const),
    ad_personalization: 'GRANTED' as const,
  });
  const out: EventEnvelope[] = [];
  for (let i = 0; i < n; i++) {
    const identifiers: Record<string, unknown> = {};
    if (maybe(0.5)) identifiers.user = `u${Math.floor(r() * 12)}`;
    if (maybe(0.5)) identifiers.email = { sha256_email: sha256(`p${Math.floor(r() * 15)}@example.com`) };
    if (maybe(0.2)) { const p = Math.floor(r() * 8); identifiers.phone = { sha256_e164: sha256(`+4915${p}`), sha256_e164_numeric: sha256(`4915${p}`) }; }
    // Some keys repeat: conversion-level dedup on event_id (the idempotency key) within and across batches.
    const key = maybe(0.1) ? `k${Math.floor(r() * 20)}` : `k-${seed}-${i}`;
    const name = pick(['purchase', 'purchase', 'page_view', 'sign_up', 'add_to_cart']);
    const body: WebEvent | ServerEvent = maybe(0.7)
      ? {
          event_name: name,
          event_source: 'WEB',
          event_data: {
            client_id: `c${Math.floor(r() * 25)}`,
            session_id: `s${Math.floor(r() * 40)}`,
            page_location: maybe(0.3) ? `https://shop.example/p${i}?ttclid=click${Math.floor(r() * 10)}` : `https://shop.example/p${i}`,
            user_agent: `agent-${Math.floor(r() * 4)}`,
          },
          event_metadata: { idempotency_key: key, identifiers, consent: consent() },
        }
      : {
          event_name: name,
          event_source: 'SERVER',
          event_data: { value: i },
          event_metadata: { idempotency_key: key, identifiers, consent: consent() },
        };
    // Times mostly rising, sometimes equal or earlier (a backlog, a late server event), spread over two weeks.
    const receivedAt = T0 + Math.floor(i * (14 * DAY) / n) - (maybe(0.1) ? Math.floor(r() * 3 * DAY) : 0) - (maybe(0.1) ? 0 : i % 3);
    out.push(fromA([body], { workspaceId: WS, keyMode: maybe(0.1) ? 'test' : 'live', receivedAt, requestId: `req-${seed}-${i}` })[0]!);
  }
  return out;
}

async function freshStore(): Promise<Db> {
  const db = await openDatabase({ inMemory: true });
  await db.query('INSERT INTO workspaces (id, name, plan) VALUES ($1, $2, $3)', [WS, 'eq', 'free']);
  await writeForwardingSetup(db, WS, SETUP);
  await db.query(`INSERT INTO connections (workspace_id, status, time_zone) VALUES ($1, 'connected', 'Europe/Berlin')`, [WS]);
  return db;
}

const tables = async (db: Db) => ({
  nodes: (
    await db.query(
      `SELECT node_id, workspace_id, key_mode, kind, value, cluster_id, first_seen_at, last_seen_at, page_location, user_agent, page_seen_at
       FROM identity_nodes ORDER BY node_id`,
    )
  ).rows,
  edges: (await db.query('SELECT * FROM identity_edges ORDER BY workspace_id, key_mode, a_kind, a_value, b_kind, b_value')).rows,
  claims: (await db.query(`SELECT key, value FROM state_store WHERE key LIKE 'v' || chr(31) || '%' ORDER BY key`)).rows,
});

const shape = (o: Outcome) => (o.type === 'ok' ? { ok: o.outputs.map((x) => x.value) } : o);

describe('enrich in batches equals enrich one event at a time', () => {
  const dbs: Db[] = [];
  beforeAll(async () => {
    for (let i = 0; i < 3; i++) dbs.push(await freshStore());
  });
  afterAll(async () => {
    for (const db of dbs) await db.close();
  });

  it.each([11, 29])('seed %i: outcomes, conversions and the graph are the same', async (seed) => {
    const events = stream(seed, 400);
    // A small cap, so that refusals happen too.
    const stage = () => createEnrichProcessor({ settingsTtlMs: 0, maxClusterIdentifiers: 6 });
    const one = await processAll(dbs[0]!, stage(), events, { batchSize: 1 });
    const some = await processAll(dbs[1]!, stage(), events, { batchSize: 37 });
    const all = await processAll(dbs[2]!, stage(), events, { batchSize: 400 });
    // The stream exercises what it should: conversions, drops of several kinds, merges and refusals.
    expect(one.filter((o) => o.type === 'ok').length).toBeGreaterThan(50);
    expect(new Set(one.flatMap((o) => (o.type === 'drop' ? [o.reason] : [])))).toEqual(
      new Set(['not_selected', 'no_ad_storage_consent', 'duplicate_event_id']),
    );
    expect(some.map(shape)).toEqual(one.map(shape));
    expect(all.map(shape)).toEqual(one.map(shape));
    const reference = await tables(dbs[0]!);
    expect(reference.nodes.length).toBeGreaterThan(50);
    expect(reference.claims.length).toBeGreaterThan(50);
    expect(new Set(reference.nodes.map((n) => n.cluster_id)).size).toBeLessThan(reference.nodes.length);
    expect(await tables(dbs[1]!)).toEqual(reference);
    expect(await tables(dbs[2]!)).toEqual(reference);
  });
});
