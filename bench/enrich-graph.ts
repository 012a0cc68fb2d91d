/**
 * enrich-graph: enrich with its identity graph as partition-local state, one hot workspace on one partition.
 *
 *  - value: the whole enrich stage (services/enrich/processor.ts, as the runtimes run it: the error policy, a batch's
 *    database transaction for what enrich still keeps in Postgres, the store in memory as the Kafka runtime keeps
 *    it, its changelog entries, identity changes and conversions Avro-encoded as they would be produced) over
 *    100,000 purchases of the pipeline benchmark's 500 people: long histories. CPU per record per tenth shows
 *    whether an event's cost depends on how long its person's history is.
 *  - baseline: the identity graph the previous way, measured in the same run on the first 20,000 of the same events:
 *    every cluster an event touches loaded whole from Postgres and written back (graph-repo.ts loadGraph/saveGraph,
 *    the graph part alone, one writer).
 * Targets: one workspace on one partition ≥ 10,000 events/s through enrich; CPU per record of the last tenth ≤ 1.2×
 * the first tenth's.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import avro from 'avsc';
import { normaliseEvent } from '../services/gateway/normalise.js';
import { consentDecision } from '../services/enrich/consent.js';
import { loadGraph, saveGraph } from '../services/enrich/identity/graph-repo.js';
import { graphInputOf } from '../services/enrich/identity/identifiers.js';
import { createEnrichProcessor, type EnrichEntry } from '../services/enrich/processor.js';
import { scopeOf } from '../services/enrich/scope.js';
import { openDatabase } from '../services/shared/db/open.js';
import type { Db } from '../services/shared/db/db.js';
import { checkEnvelope } from '../services/domain/envelope-guard.js';
import { graphOwnerKey, type EventEnvelope } from '../services/domain/envelope.js';
import { writeForwardingSetup } from '../services/domain/forwarding-setup.js';
import { TOPIC_MAPPINGS } from '../services/stream/kafka/avro-mapping.js';
import { AvroPacking, FramedAvroWriter } from '../services/stream/kafka/serde.js';
import { repoRoot } from '../services/shared/repo-root.js';
import { Topics, type TopicName } from '../services/shared/topics.js';
import type { InputRecord, OutputRecord } from '../services/stream/contract.js';
import { processWithPolicy } from '../services/stream/error-policy.js';
import { HOT_ENTRIES, PartitionStore } from '../services/stream/store.js';
import { makeBodies } from './lib/events.js';
import { freshDatabase } from './lib/infra.js';
import { round, type BenchResult } from './lib/results.js';

const EVENTS_PER_REQUEST = 100;
const REQUESTS = Number(process.env.BENCH_ENRICH_REQUESTS ?? 1000);
const BASELINE_REQUESTS = 200;
const BATCH = 500;
const WORKSPACE = 'ws_enrich_graph_bench';
const TARGET_RATE = 10_000;
const TARGET_TENTHS = 1.2;

/** The pipeline benchmark's purchases of one workspace, as enrich receives them (of its 500 people by default). */
export function envelopes(requests: number, people?: number): EventEnvelope[] {
  const t0 = Date.now() - 3600_000;
  return makeBodies(requests, { events: EVENTS_PER_REQUEST, conversionsOnly: true, people }).flatMap((body, q) => {
    const ctx = { workspaceId: WORKSPACE, keyMode: 'live' as const, apiKeyId: 'key_bench', requestId: `req-${q}`, receivedAt: t0 + q * 20 };
    return (JSON.parse(body) as unknown[]).map((raw, i) => {
      const checked = checkEnvelope(normaliseEvent(ctx, '2026-11-01', raw, i));
      if (!checked.ok) throw new Error(`bench event refused: ${checked.reason}`);
      return checked.envelope;
    });
  });
}

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

/** Encoders of the topics a batch produces to, as the service's serde writes them (its writer; no registry: id 0). */
function encoders(): (topic: TopicName, value: unknown) => Buffer {
  const types = new Map<string, avro.Type>();
  const writer = new FramedAvroWriter();
  return (topic, value) => {
    const mapping = TOPIC_MAPPINGS[topic];
    let type = types.get(topic);
    if (!type) types.set(topic, (type = avro.Type.forSchema(JSON.parse(readFileSync(join(repoRoot(), 'schemas', mapping.schemaFile), 'utf8')))));
    return writer.write(type, 0, mapping.toAvro(value));
  };
}

interface Tenth {
  readonly records: number;
  readonly nodeCpuUsPerRecord: number;
  readonly postgresCpuUsPerRecord: number;
  readonly recordsPerSec: number;
}

/** Runs `batches` one after another and measures each tenth of the records. */
async function measured(records: number, batches: Array<() => Promise<number>>): Promise<{ wallMs: number; tenths: Tenth[] }> {
  const tenths: Tenth[] = [];
  let done = 0;
  let mark = { done: 0, cpu: process.cpuUsage(), pg: postgresCpuSec(), t: performance.now() };
  const t0 = performance.now();
  for (const run of batches) {
    done += await run();
    if (done - mark.done >= records / 10 || done === records) {
      const cpu = process.cpuUsage(mark.cpu);
      const now = { done, cpu: process.cpuUsage(), pg: postgresCpuSec(), t: performance.now() };
      const n = done - mark.done;
      tenths.push({
        records: n,
        nodeCpuUsPerRecord: round((cpu.user + cpu.system) / n, 1),
        postgresCpuUsPerRecord: round(((now.pg - mark.pg) * 1e6) / n, 1),
        recordsPerSec: Math.round((n / (now.t - mark.t)) * 1000),
      });
      mark = now;
    }
  }
  return { wallMs: performance.now() - t0, tenths };
}

const sum = (tenths: readonly Tenth[], f: (t: Tenth) => number) => tenths.reduce((n, t) => n + f(t) * t.records, 0) / tenths.reduce((n, t) => n + t.records, 0);

async function withDatabase<T>(baseUrl: string, fn: (db: Db) => Promise<T>): Promise<T> {
  const fresh = await freshDatabase(baseUrl);
  const db = await openDatabase({ databaseUrl: fresh.url });
  try {
    await db.query(`INSERT INTO workspaces (id, name, plan) VALUES ($1, 'bench', 'free')`, [WORKSPACE]);
    await writeForwardingSetup(db, WORKSPACE, {
      event_source: 'WEB',
      event_source_id: 'PIXEL_BENCH',
      pii_mode: 'hashed',
      click_window_days: 7,
      test_event_code: null,
      events: [{ name: 'purchase', platform_event: 'CompletePayment' }],
    });
    return await fn(db);
  } finally {
    await db.close();
    await fresh.drop();
  }
}

/** The whole enrich stage on one partition that owns the workspace. */
async function partitionLocal(baseUrl: string, events: readonly EventEnvelope[]) {
  return withDatabase(baseUrl, async (db) => {
    const enrich = createEnrichProcessor();
    const spec = enrich.store!;
    // Packed as the Kafka runner packs it (in the changelog's Avro schema).
    const store = new PartitionStore<EnrichEntry>({ ms: spec.retentionMs, byPrefix: spec.retentionByPrefix }, HOT_ENTRIES, new AvroPacking(spec.changelog));
    const encode = encoders();
    const bytes = { changelog: 0, changes: 0, conversions: 0, changelogRecords: 0 };
    let offset = 0;
    const batches = [];
    for (let i = 0; i < events.length; i += BATCH) {
      const slice = events.slice(i, i + BATCH);
      batches.push(async () => {
        const records: InputRecord<unknown>[] = slice.map((e) => ({ topic: Topics.eventsDeduped, partition: 0, offset: String(offset++), key: graphOwnerKey(e), value: e, timestamp: e.received_at }));
        const tx = store.begin();
        const emitted: OutputRecord[] = [];
        const outcomes = await db.transaction((sql) => processWithPolicy(enrich, records, { sql, store: tx, now: Date.now, emitted }));
        for (const o of outcomes) if (o.type === 'ok') for (const out of o.outputs) bytes.conversions += encode(out.topic, out.value).length;
        for (const o of emitted) bytes.changes += encode(o.topic, o.value).length;
        // As the Kafka runner does: the changelog values go to the store with the writes (packed from them when cold).
        const changelog = new Map<string, Buffer>();
        for (const [key, value] of tx.changes()) {
          if (value !== null) changelog.set(key, encode(Topics.identityState, value));
          bytes.changelog += changelog.get(key)?.length ?? 0;
          bytes.changelogRecords++;
        }
        store.apply(tx, Date.now(), changelog);
        return slice.length;
      });
    }
    return {
      ...summary(events.length, await measured(events.length, batches)),
      storeEntries: store.size,
      changelogRecordsPerEvent: round(bytes.changelogRecords / events.length, 2),
      changelogBytesPerEvent: Math.round(bytes.changelog / events.length),
      changesBytesPerEvent: Math.round(bytes.changes / events.length),
      conversionBytesPerEvent: Math.round(bytes.conversions / events.length),
    };
  });
}

const cpuOf = (t: Tenth) => t.nodeCpuUsPerRecord + t.postgresCpuUsPerRecord;

/** A run's rate, CPU per event, and how the last tenth's CPU compares with the first's. */
function summary(records: number, run: { wallMs: number; tenths: Tenth[] }) {
  return {
    recordsPerSec: Math.round((records / run.wallMs) * 1000),
    nodeCpuUsPerRecord: round(sum(run.tenths, (t) => t.nodeCpuUsPerRecord), 1),
    postgresCpuUsPerRecord: round(sum(run.tenths, (t) => t.postgresCpuUsPerRecord), 1),
    lastTenthOverFirst: round(cpuOf(run.tenths.at(-1)!) / cpuOf(run.tenths[0]!), 2),
    tenths: run.tenths,
  };
}

/** The graph part the previous way: whole clusters loaded from and written to Postgres, one writer. */
async function wholeClusters(baseUrl: string, events: readonly EventEnvelope[]) {
  return withDatabase(baseUrl, async (db) => {
    const batches = [];
    for (let i = 0; i < events.length; i += BATCH) {
      const slice = events.slice(i, i + BATCH).map((e) => ({ e, scope: scopeOf(e), graph: graphInputOf(e, consentDecision(e.consent)) }));
      batches.push(async () => {
        await db.transaction(async (sql) => {
          const graph = await loadGraph(sql, slice.flatMap((i) => i.graph.nodes.map((node) => ({ scope: i.scope, node }))), { maxClusterIdentifiers: 100 });
          for (const i of slice) graph.link(i.scope, i.graph.nodes, i.e.received_at, null);
          await saveGraph(sql, graph);
        });
        return slice.length;
      });
    }
    return summary(events.length, await measured(events.length, batches));
  });
}

export async function benchEnrichGraph(databaseUrl: string, log: (l: string) => void): Promise<Omit<BenchResult, 'git_sha' | 'date'>> {
  log('enrich-graph (one hot workspace on one partition: enrich with its partition-local graph; baseline: whole clusters in Postgres)');
  const events = envelopes(REQUESTS);
  await partitionLocal(databaseUrl, events.slice(0, 5_000)); // warm-up (JIT, connections)
  const local = await partitionLocal(databaseUrl, events);
  log(`  enrich, partition-local graph: ${local.recordsPerSec} events/s, node ${local.nodeCpuUsPerRecord} + Postgres ${local.postgresCpuUsPerRecord} µs CPU/event; last tenth / first: ${local.lastTenthOverFirst}`);
  const baselineEvents = events.slice(0, BASELINE_REQUESTS * EVENTS_PER_REQUEST);
  const whole = await wholeClusters(databaseUrl, baselineEvents);
  log(`  graph part alone, whole clusters in Postgres: ${whole.recordsPerSec} events/s, node ${whole.nodeCpuUsPerRecord} + Postgres ${whole.postgresCpuUsPerRecord} µs CPU/event; last tenth / first: ${whole.lastTenthOverFirst}`);
  const met = local.recordsPerSec >= TARGET_RATE && local.lastTenthOverFirst <= TARGET_TENTHS;
  return {
    name: 'enrich-graph',
    unit: 'events/s',
    value: local.recordsPerSec,
    baseline: whole.recordsPerSec,
    ratio: round(local.recordsPerSec / whole.recordsPerSec, 2),
    p50_ms: null,
    p99_ms: null,
    notes:
      `${events.length} purchases of 500 people (long histories), one workspace, batches of ${BATCH}, one partition. value: the whole enrich stage ` +
      `with its graph as partition-local state (store in memory as on Kafka, changelog/changes/conversions Avro-encoded, not produced; ` +
      `its remaining SQL on Postgres); baseline: the graph part alone the previous way (whole clusters loaded from and saved to Postgres, ` +
      `one writer, first ${baselineEvents.length} events). CPU per event per tenth in detail. The bench process floats on both cores.`,
    target: `≥ ${TARGET_RATE.toLocaleString('en-US')} events/s through enrich for one workspace on one partition; CPU per event of the last tenth ≤ ${TARGET_TENTHS}× the first`,
    met,
    detail: { events: events.length, batch: BATCH, partitionLocal: local, wholeClusters: whole },
  };
}
