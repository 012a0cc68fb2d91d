/**
 * enrich-graph (issue #9, "measure both roads"): the identity-graph part of enrich for the pipeline benchmark's
 * events, on the two designs of docs/decisions.md, with the SAME link code (services/enrich/steps/link-identities.ts)
 * behind its GraphStore seam:
 *  - set-based (what ships): Postgres tables, one transaction per batch of 350 with the workspace's advisory lock,
 *    one load of the touched clusters, one upsert of nodes and one of edges; 3 writers of one workspace at once
 *    (enrich's 3 concurrent partitions), and 1 writer for comparison;
 *  - partition-local: the graph in the memory of the one writer that owns the workspace's partition (no lock, no
 *    database); its changes serialised as changelog records (JSON here; their bytes reported, their produce cost is
 *    kafka-client's per-record cost).
 * value = local records/s, baseline = set-based (3 writers) records/s, in one run. Both end with the same nodes and
 * clusters (checked), so they did the same work.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { normaliseEvent } from '../services/gateway/normalise.js';
import { consentDecision } from '../services/enrich/consent.js';
import { GraphSnapshot, postgresGraphStore, type EdgeRow, type GraphStore, type NodeRow } from '../services/enrich/identity/graph-repo.js';
import { graphInputOf } from '../services/enrich/identity/identifiers.js';
import type { EnrichItem } from '../services/enrich/item.js';
import { scopeOf } from '../services/enrich/scope.js';
import { createLinkIdentitiesStep } from '../services/enrich/steps/link-identities.js';
import type { Selection } from '../services/enrich/steps/select-conversion.js';
import { openDatabase } from '../services/shared/db/open.js';
import type { Db, Sql } from '../services/shared/db/db.js';
import { checkEnvelope } from '../services/shared/envelope-guard.js';
import { envelopeKey } from '../services/shared/envelope.js';
import type { ForwardingSetup } from '../services/shared/forwarding-setup.js';
import { Topics } from '../services/shared/topics.js';
import { makeBodies } from './lib/events.js';
import { freshDatabase } from './lib/infra.js';
import { round, type BenchResult } from './lib/results.js';

const REQUESTS = 200;
const EVENTS_PER_REQUEST = 100;
const BATCH = 350;
const PARTITIONS = 6;
const WORKSPACE = 'ws_enrich_graph_bench';

const setup: ForwardingSetup = {
  workspace_id: WORKSPACE,
  event_source: 'web',
  event_source_id: 'PIXEL_BENCH',
  pii_mode: 'hashed',
  click_window_days: 7,
  test_event_code: null,
  events: [{ name: 'purchase', platform_event: 'CompletePayment' }],
  updated_at: new Date(0).toISOString(),
};
const convert: Selection = { kind: 'convert', setup, platformEvent: 'CompletePayment', testEventCode: null };

/** The pipeline benchmark's events (purchases with ad consent), as enrich receives them, by partition. */
function itemsByPartition(): EnrichItem[][] {
  const t0 = Date.now() - 3600_000;
  const partitions: EnrichItem[][] = Array.from({ length: PARTITIONS }, () => []);
  makeBodies(REQUESTS, { events: EVENTS_PER_REQUEST, conversionsOnly: true }).forEach((body, q) => {
    const ctx = { workspaceId: WORKSPACE, keyMode: 'live' as const, apiKeyId: 'key_bench', requestId: `req-${q}`, receivedAt: t0 + q * 50 };
    (JSON.parse(body) as unknown[]).forEach((raw, i) => {
      const checked = checkEnvelope(normaliseEvent(ctx, '2026-11-01', raw, i));
      if (!checked.ok) throw new Error(`bench event refused: ${checked.reason}`);
      const e = checked.envelope;
      const key = envelopeKey(e);
      const partition = createHash('sha256').update(key).digest().readUInt32BE(0) % PARTITIONS;
      const list = partitions[partition]!;
      const consent = consentDecision(e.consent);
      list.push({
        position: list.length,
        record: { topic: Topics.eventsDeduped, partition, offset: String(list.length), key, value: e, timestamp: e.received_at },
        e,
        consent,
        scope: scopeOf(e),
        graph: graphInputOf(e, consent),
      });
    });
  });
  return partitions;
}

const batchesOf = (items: readonly EnrichItem[]): EnrichItem[][] => {
  const out: EnrichItem[][] = [];
  for (let i = 0; i < items.length; i += BATCH) out.push(items.slice(i, i + BATCH).map((item, position) => ({ ...item, position })));
  return out;
};

/** CPU seconds of every process named `postgres` (the server's backends; /proc, Linux). */
function postgresCpuSec(): number {
  const tick = 100; // USER_HZ
  let total = 0;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      if (!stat.slice(stat.indexOf('(') + 1, close).startsWith('postgres')) continue;
      const f = stat.slice(close + 2).split(' ');
      total += (Number(f[11]) + Number(f[12])) / tick;
    } catch {
      // the process ended meanwhile
    }
  }
  return total;
}

/** The graph in the memory of the partition that owns the workspace: no lock, no database, changes to a changelog. */
class LocalGraphStore implements GraphStore {
  private readonly nodes = new Map<string, NodeRow>();
  private readonly clusters = new Map<string, Set<string>>();
  private readonly edges = new Map<string, EdgeRow>();
  changelogRecords = 0;
  changelogBytes = 0;

  async lock(): Promise<void> {}

  async load(_sql: Sql, nodes: Parameters<GraphStore['load']>[1], opts: { readonly maxClusterIdentifiers: number }): Promise<GraphSnapshot> {
    const snapshot = new GraphSnapshot(opts);
    const clusterIds = new Set<string>();
    for (const n of nodes) {
      const row = this.nodes.get(snapshot.idOf(n.scope, n.node));
      if (row) clusterIds.add(row.cluster_id);
    }
    const rows: NodeRow[] = [];
    for (const c of clusterIds) for (const id of this.clusters.get(c) ?? []) rows.push({ ...this.nodes.get(id)! });
    snapshot.load(rows);
    return snapshot;
  }

  async save(_sql: Sql, snapshot: GraphSnapshot): Promise<void> {
    const { nodes, edges } = snapshot.changes();
    for (const r of nodes) {
      const old = this.nodes.get(r.node_id);
      if (old && old.cluster_id !== r.cluster_id) {
        const members = this.clusters.get(old.cluster_id);
        members?.delete(r.node_id);
        if (members?.size === 0) this.clusters.delete(old.cluster_id);
      }
      this.nodes.set(r.node_id, r);
      let members = this.clusters.get(r.cluster_id);
      if (!members) this.clusters.set(r.cluster_id, (members = new Set()));
      members.add(r.node_id);
      this.changelogBytes += Buffer.byteLength(JSON.stringify(r));
      this.changelogRecords++;
    }
    for (const e of edges) {
      const k = `${e.workspace_id}\n${e.key_mode}\n${e.a_kind}\n${e.a_value}\n${e.b_kind}\n${e.b_value}`;
      const old = this.edges.get(k);
      const merged = old ? { ...e, first_seen_at: Math.min(old.first_seen_at, e.first_seen_at), last_seen_at: Math.max(old.last_seen_at, e.last_seen_at) } : e;
      this.edges.set(k, merged);
      this.changelogBytes += Buffer.byteLength(JSON.stringify(merged));
      this.changelogRecords++;
    }
  }

  shape(): { nodes: number; clusters: number; edges: number } {
    return { nodes: this.nodes.size, clusters: this.clusters.size, edges: this.edges.size };
  }
}

interface RoadResult {
  readonly recordsPerSec: number;
  readonly wallMs: number;
  readonly nodeCpuUsPerRecord: number;
  readonly postgresCpuUsPerRecord: number;
  readonly shape: { nodes: number; clusters: number; edges: number };
}

async function setBased(baseUrl: string, partitions: readonly EnrichItem[][], writers: number): Promise<RoadResult> {
  const fresh = await freshDatabase(baseUrl);
  const db: Db = await openDatabase({ databaseUrl: fresh.url });
  try {
    const link = createLinkIdentitiesStep({ maxClusterIdentifiers: 100, store: postgresGraphStore });
    // Writer w takes partitions w, w + writers, …, one batch after the other (as enrich's concurrent partitions do).
    const streams = Array.from({ length: writers }, (_, w) => partitions.filter((_, p) => p % writers === w).flatMap(batchesOf));
    const records = partitions.reduce((n, p) => n + p.length, 0);
    const cpu0 = process.cpuUsage();
    const pg0 = postgresCpuSec();
    const t0 = performance.now();
    await Promise.all(
      streams.map(async (batches) => {
        for (const batch of batches) await db.transaction((sql) => link(sql, batch, batch.map(() => convert)));
      }),
    );
    const wallMs = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const pgSec = postgresCpuSec() - pg0;
    const shape = (
      await db.query<{ nodes: string; clusters: string; edges: string }>(
        `SELECT (SELECT count(*) FROM identity_nodes) AS nodes, (SELECT count(DISTINCT cluster_id) FROM identity_nodes) AS clusters,
                (SELECT count(*) FROM identity_edges) AS edges`,
      )
    ).rows[0]!;
    return {
      recordsPerSec: Math.round((records / wallMs) * 1000),
      wallMs: Math.round(wallMs),
      nodeCpuUsPerRecord: round((cpu.user + cpu.system) / records, 1),
      postgresCpuUsPerRecord: round((pgSec * 1e6) / records, 1),
      shape: { nodes: Number(shape.nodes), clusters: Number(shape.clusters), edges: Number(shape.edges) },
    };
  } finally {
    await db.close();
    await fresh.drop();
  }
}

async function local(partitions: readonly EnrichItem[][]): Promise<RoadResult & { changelogBytesPerRecord: number; changelogRecordsPerRecord: number }> {
  const store = new LocalGraphStore();
  const link = createLinkIdentitiesStep({ maxClusterIdentifiers: 100, store });
  // One workspace, one owner: every batch on one writer (the partition the workspace is keyed to), in the same order
  // as the single set-based writer.
  const batches = partitions.flatMap(batchesOf);
  const records = partitions.reduce((n, p) => n + p.length, 0);
  const noSql = undefined as unknown as Sql;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (const batch of batches) await link(noSql, batch, batch.map(() => convert));
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return {
    recordsPerSec: Math.round((records / wallMs) * 1000),
    wallMs: Math.round(wallMs),
    nodeCpuUsPerRecord: round((cpu.user + cpu.system) / records, 1),
    postgresCpuUsPerRecord: 0,
    shape: store.shape(),
    changelogBytesPerRecord: Math.round(store.changelogBytes / records),
    changelogRecordsPerRecord: round(store.changelogRecords / records, 2),
  };
}

export async function benchEnrichGraph(databaseUrl: string, log: (l: string) => void): Promise<Omit<BenchResult, 'git_sha' | 'date'>> {
  log('enrich-graph (the identity graph of enrich: set-based Postgres vs a partition-local store, same link code)');
  const partitions = itemsByPartition();
  const records = partitions.reduce((n, p) => n + p.length, 0);
  // A warm-up of each (JIT, connection pool), then the measured runs.
  await local(partitions.map((p) => p.slice(0, 700)));
  const localRun = await local(partitions);
  log(`  local (1 writer, no lock): ${localRun.recordsPerSec} records/s, ${localRun.nodeCpuUsPerRecord} µs CPU/record, changelog ${localRun.changelogRecordsPerRecord} records / ${localRun.changelogBytesPerRecord} bytes per event`);
  const one = await setBased(databaseUrl, partitions, 1);
  log(`  set-based, 1 writer: ${one.recordsPerSec} records/s, node ${one.nodeCpuUsPerRecord} + Postgres ${one.postgresCpuUsPerRecord} µs CPU/record`);
  const three = await setBased(databaseUrl, partitions, 3);
  log(`  set-based, 3 writers of one workspace: ${three.recordsPerSec} records/s, node ${three.nodeCpuUsPerRecord} + Postgres ${three.postgresCpuUsPerRecord} µs CPU/record`);
  const same = JSON.stringify(localRun.shape) === JSON.stringify(one.shape);
  log(`  graphs: local ${JSON.stringify(localRun.shape)}, set-based ${JSON.stringify(one.shape)} (3 writers: ${JSON.stringify(three.shape)})${same ? '' : ' — DIFFERENT'}`);
  if (!same) throw new Error('the two stores ended with different graphs: the comparison would not be of the same work');
  return {
    name: 'enrich-graph',
    unit: 'records/s',
    value: localRun.recordsPerSec,
    baseline: three.recordsPerSec,
    ratio: round(localRun.recordsPerSec / three.recordsPerSec, 2),
    p50_ms: null,
    p99_ms: null,
    notes:
      `${records} events of the pipeline benchmark (500 people), batches of ${BATCH}. value: the graph in the memory of the partition ` +
      `owning the workspace (1 writer, no lock; changelog serialised as JSON, not produced); baseline: the shipped set-based store on ` +
      `Postgres with 3 writers of the one workspace (enrich's 3 concurrent partitions). Node and Postgres CPU per record in detail. ` +
      `The bench process floats on both cores.`,
    target: '– (measures the two roads of docs/decisions.md; no target of its own)',
    met: null,
    detail: { records, batch: BATCH, local: localRun, setBased1: one, setBased3: three },
  };
}
