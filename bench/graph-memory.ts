/**
 * graph-memory: bytes of heap per identifier in enrich's identity graph, as the Kafka runtime holds a partition's
 * state in memory (stream/store.ts PartitionStore over the changelog identity.graph-state):
 *  - value: the cold entries packed in the changelog's Avro schema (stream/kafka/serde.ts AvroPacking, what the Kafka
 *    runner gives enrich's store);
 *  - baseline: packed as JSON (the store's default, what enrich's store held before).
 * The graph is built the way enrich builds it (identity/graph-state.ts GraphState over batches of 500, each applied to
 * the store) from the pipeline benchmark's purchases of BENCH_GRAPH_PEOPLE people (100,000: the drain's shape), two
 * events a person on average. Each packing is measured in a process of its own (node --expose-gc): heapUsed +
 * arrayBuffers after full GCs, before and after building the store; per identifier (the store's node entries;
 * its cluster entries are counted in, as the state a person costs). The 10,000 latest writes stay unpacked in both.
 */
import { writeFileSync } from 'node:fs';
import { consentDecision } from '../services/enrich/consent.js';
import { GraphState, type GraphEntry } from '../services/enrich/identity/graph-state.js';
import { graphInputOf, pageDataOf } from '../services/enrich/identity/identifiers.js';
import { createEnrichProcessor } from '../services/enrich/processor.js';
import { scopeOf } from '../services/enrich/scope.js';
import { AvroPacking } from '../services/stream/kafka/serde.js';
import { HOT_ENTRIES, PartitionStore } from '../services/stream/store.js';
import { envelopes } from './enrich-graph.js';
import { childMain, fullGc, measureInChild } from './lib/memory.js';
import { round, type BenchResult } from './lib/results.js';

const PEOPLE = Number(process.env.BENCH_GRAPH_PEOPLE ?? 100_000);
const REQUESTS = Math.ceil((2 * PEOPLE) / 100);
const BATCH = 500;
/** A partition of this many identifiers is what the docs size the heap for. */
const SIZING_IDENTIFIERS = 10_000_000;

type Packing = 'avro' | 'json';

interface GraphMeasure {
  readonly packing: Packing;
  readonly events: number;
  readonly entries: number;
  readonly identifiers: number;
  readonly clusters: number;
  readonly bytes: number;
  readonly bytesPerIdentifier: number;
  readonly buildUsPerEvent: number;
}

const used = (): number => {
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
};

/** In the child: build the graph of PEOPLE people into one store and measure it. */
async function measureGraph(packing: Packing, out: string): Promise<void> {
  const spec = createEnrichProcessor().store!;
  const events = envelopes(REQUESTS, PEOPLE);
  fullGc();
  const before = used();
  const store = new PartitionStore<GraphEntry>(
    { ms: spec.retentionMs, byPrefix: spec.retentionByPrefix },
    HOT_ENTRIES,
    packing === 'avro' ? new AvroPacking<GraphEntry>(spec.changelog) : undefined,
  );
  // The keys the store holds (counted by kind tag after the build), kept apart from it and dropped before measuring.
  let live: Map<string, boolean> | undefined = new Map();
  const t0 = performance.now();
  for (let i = 0; i < events.length; i += BATCH) {
    const items = events.slice(i, i + BATCH).map((e) => {
      const consent = consentDecision(e.consent);
      return { e, scope: scopeOf(e), consent, nodes: graphInputOf(e, consent).nodes };
    });
    const tx = store.begin();
    const state = await GraphState.load(tx, items.map((it) => ({ scope: it.scope, nodes: it.nodes })), { maxClusterIdentifiers: 100 });
    for (const it of items) state.link(it.scope, it.nodes, it.e.received_at, it.consent.graph ? pageDataOf(it.e) : null);
    await state.save();
    for (const [key, value] of tx.changes()) {
      if (value === null) live.delete(key);
      else live.set(key, true);
    }
    store.apply(tx, Date.now());
  }
  const buildUs = ((performance.now() - t0) * 1000) / events.length;
  const entries = store.size;
  if (entries !== live.size) throw new Error(`the store holds ${entries} entries, ${live.size} were written`);
  let clusters = 0;
  for (const key of live.keys()) if (key[0] === 'c' || key[0] === 'l') clusters++;
  live = undefined;
  fullGc();
  const bytes = used() - before;
  // The store is used after the measure: optimised code does not keep a variable past its last use alive.
  if (store.size !== entries) throw new Error('the store changed while measured');
  const identifiers = entries - clusters;
  const result: GraphMeasure = { packing, events: events.length, entries, identifiers, clusters, bytes, bytesPerIdentifier: bytes / identifiers, buildUsPerEvent: buildUs };
  writeFileSync(out, JSON.stringify(result));
}

export async function benchGraphMemory(log: (l: string) => void): Promise<Omit<BenchResult, 'git_sha' | 'date'>> {
  log(`graph-memory (enrich's identity graph of ${PEOPLE.toLocaleString('en-US')} people, --expose-gc)`);
  const json = await measureInChild<GraphMeasure>('graph-memory', 'json');
  const avro = await measureInChild<GraphMeasure>('graph-memory', 'avro');
  for (const m of [json, avro]) {
    log(
      `  packed as ${m.packing}: ${Math.round(m.bytesPerIdentifier)} B/identifier (${m.identifiers.toLocaleString('en-US')} identifiers, ` +
        `${m.clusters.toLocaleString('en-US')} cluster entries, ${Math.round(m.bytes / 2 ** 20)} MiB), built at ${round(m.buildUsPerEvent, 1)} µs/event`,
    );
  }
  const gib = (m: GraphMeasure) => round((m.bytesPerIdentifier * SIZING_IDENTIFIERS) / 2 ** 30, 1);
  return {
    name: 'graph-memory',
    unit: 'bytes/identifier',
    value: Math.round(avro.bytesPerIdentifier),
    baseline: Math.round(json.bytesPerIdentifier),
    ratio: round(avro.bytesPerIdentifier / json.bytesPerIdentifier, 3),
    p50_ms: null,
    p99_ms: null,
    notes:
      `value: enrich's partition store with its cold entries packed in the changelog's Avro schema (stream/kafka/serde.ts AvroPacking, as the Kafka runner keeps it); ` +
      `baseline: packed as JSON (the store's default). The graph of ${avro.events.toLocaleString('en-US')} purchases of ${PEOPLE.toLocaleString('en-US')} people built as enrich builds it ` +
      `(GraphState, batches of ${BATCH}); heapUsed + arrayBuffers after full GCs, before and after building the store, one process per packing, divided by the store's identifier entries ` +
      `(${avro.identifiers.toLocaleString('en-US')}; its ${avro.clusters.toLocaleString('en-US')} cluster entries counted in). A partition of ${SIZING_IDENTIFIERS.toLocaleString('en-US')} identifiers: ` +
      `~${gib(avro)} GiB of heap (${gib(json)} packed as JSON).`,
    detail: { json, avro },
  };
}

childMain('graph-memory', ['avro', 'json'] as const, measureGraph);
