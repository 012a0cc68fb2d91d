/**
 * Enrich's store entries on the changelog (identity.graph-state): each kind round-trips (a cluster with its few click
 * ids and without, a cluster's click list), an entry written before click lists reads back with its click ids, and
 * the change is BACKWARD compatible. The partition store's cold entries packed in the same schema (AvroPacking)
 * round-trip with their write times.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import avro from 'avsc';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../../shared/repo-root.js';
import { Topics } from '../../shared/topics.js';
import { PartitionStore } from '../store.js';
import { identityStateMapping } from './avro-mapping.js';
import { AvroPacking, FramedAvroWriter } from './serde.js';

const schema = JSON.parse(readFileSync(join(repoRoot(), 'schemas', 'identity-state.avsc'), 'utf8'));
const type = avro.Type.forSchema(schema);
const previous = avro.Type.forSchema({ ...schema, fields: schema.fields.filter((f: { name: string }) => f.name !== 'click_list') });
/** The cluster record's fields, and the schema as it was before the cluster's `clicks_apart`. */
const clusterFields = (s: typeof schema): Array<{ name: string; default?: unknown; type: unknown }> =>
  s.fields.find((f: { name: string }) => f.name === 'cluster').type[1].fields;
const beforeApart = structuredClone(schema);
clusterFields(beforeApart).pop();
const roundTrip = (v: Record<string, unknown>) => identityStateMapping.fromAvro(type.fromBuffer(type.toBuffer(identityStateMapping.toAvro(v))));

const click = { kind: 'ttclid', value: 'E.C.P.1', first_seen_at: 1_000, last_seen_at: 2_000 };
const member = { kind: 'email_sha256', value: 'a'.repeat(64), first_seen_at: 1_000, last_seen_at: 3_000 };
const cluster = { into: null, members: [member], page_with_location: null, page_any: null, ad_storage_withdrawn_at: null, ad_user_data_withdrawn_at: null };

const ENTRIES: Array<[string, Record<string, unknown>]> = [
    ['an identifier', { cluster: 'c_1', first_seen_at: 1, last_seen_at: 2, page_location: 'https://shop.example/', user_agent: null, page_seen_at: 2 }],
    ['a cluster', cluster],
    ['a cluster holding its click ids', { ...cluster, clicks: [click], clicks_apart: false }],
    ['a cluster with its click ids apart', { ...cluster, clicks_apart: true }],
    ['a forward', { ...cluster, members: [], into: 'c_2' }],
    ['a click list', { clicks: [click] }],
    ['a claim', { claimed_at: 5 }],
];

describe('identity-state schema', () => {
  it.each(ENTRIES)('round-trips %s', (_name, v) => {
    expect(roundTrip(v)).toEqual(v);
  });

  it('writes a cluster without click ids with its clicks field empty, and sets exactly one field per entry', () => {
    const written = identityStateMapping.toAvro(cluster) as Record<string, unknown>;
    expect(written).toMatchObject({ node: null, claim: null, click_list: null, cluster: { clicks: [] } });
    expect(identityStateMapping.toAvro({ clicks: [click] })).toStrictEqual({ node: null, cluster: null, claim: null, click_list: { clicks: [click] } });
  });

  it('reads a cluster written before click lists with its click ids', () => {
    const old = previous.toBuffer({ node: null, cluster: { ...cluster, clicks: [click] }, claim: null });
    const resolver = type.createResolver(previous);
    expect(identityStateMapping.fromAvro(type.fromBuffer(old, resolver))).toEqual({ ...cluster, clicks: [click] });
  });

  it('reads a cluster written before clicks_apart without it (not known: its click list is looked for)', () => {
    const older = avro.Type.forSchema(beforeApart);
    const old = older.toBuffer({ node: null, cluster: { ...cluster, clicks: [click] }, claim: null, click_list: null });
    const read = identityStateMapping.fromAvro(type.fromBuffer(old, type.createResolver(older)));
    expect(read).toEqual({ ...cluster, clicks: [click] });
    expect(read).not.toHaveProperty('clicks_apart');
  });

  it("adds the cluster's clicks_apart last, optional with default null (BACKWARD compatible)", () => {
    expect(clusterFields(schema).at(-1)).toMatchObject({ name: 'clicks_apart', default: null, type: ['null', 'boolean'] });
    expect(() => type.createResolver(avro.Type.forSchema(beforeApart))).not.toThrow();
  });

  it('adds click_list last, optional with default null (BACKWARD compatible)', () => {
    expect(schema.fields.at(-1)).toMatchObject({ name: 'click_list', default: null });
    expect(schema.fields.at(-1).type[0]).toBe('null');
    expect(() => type.createResolver(previous)).not.toThrow();
  });

  it.each(ENTRIES)('packs %s for the partition store, with its write time', (_name, v) => {
    const packing = new AvroPacking<Record<string, unknown>>(Topics.identityState);
    for (const writtenAt of [0, 1_764_000_123_456, 1_764_000_123_456.75]) {
      const packed = packing.pack(writtenAt, v);
      expect(packing.unpack(packed)).toEqual(v);
      expect(packing.writtenAt(packed)).toBe(writtenAt);
      // Smaller than the store's default, JSON, for a write time of these years.
      if (writtenAt > 0) expect(packed.length).toBeLessThan(JSON.stringify([writtenAt, v]).length);
    }
  });

  it.each(ENTRIES)('packs %s from its changelog record as from its value', (_name, v) => {
    const packing = new AvroPacking<Record<string, unknown>>(Topics.identityState);
    const changelogValue = new FramedAvroWriter().write(type, 1234, identityStateMapping.toAvro(v));
    expect(packing.packEncoded(1_764_000_123_456, changelogValue)).toBe(packing.pack(1_764_000_123_456, v));
  });

  it('packs an entry larger than its scratch buffer, and another packing reads it', () => {
    const members = Array.from({ length: 400 }, (_, i) => ({ ...member, value: i.toString(16).padStart(64, '0') }));
    const big = { ...cluster, members };
    const packed = new AvroPacking<Record<string, unknown>>(Topics.identityState).pack(42, big);
    expect(packed.length).toBeGreaterThan(16 * 1024);
    const other = new AvroPacking<Record<string, unknown>>(Topics.identityState);
    expect(other.unpack(packed)).toEqual(big);
    expect(other.writtenAt(packed)).toBe(42);
  });

  it('keeps a partition store packed in Avro: cold reads equal the writes, expiry in write order', async () => {
    const HOUR = 3_600_000;
    const s = new PartitionStore<Record<string, unknown>>({ ms: HOUR }, 1, new AvroPacking(Topics.identityState));
    s.restore('n:a', ENTRIES[0]![1], 100, 200);
    expect(s.read('n:a')).toEqual(ENTRIES[0]![1]);
    const tx = s.begin();
    await tx.put('c:1', { ...cluster, clicks: [click] });
    await tx.put('v:1', { claimed_at: 5 });
    await tx.put('n:b', ENTRIES[0]![1]);
    // As the Kafka runner applies a chunk: with the changelog values of its writes ('n:b' only, here).
    const changelogValue = new FramedAvroWriter().write(type, 1, identityStateMapping.toAvro(ENTRIES[0]![1]));
    s.apply(tx, 300, new Map([['n:b', changelogValue]]));
    // One hot entry: 'c:1' and 'v:1' were packed from their values when the writes after them were applied.
    expect(s.read('c:1')).toEqual({ ...cluster, clicks: [click] });
    expect(s.read('v:1')).toEqual({ claimed_at: 5 });
    const next = s.begin();
    await next.put('v:2', { claimed_at: 6 });
    s.apply(next, 400);
    // 'n:b' turned cold: packed from its changelog value, read back equal.
    expect(s.read('n:b')).toEqual(ENTRIES[0]![1]);
    expect(s.read('n:b')).not.toBe(ENTRIES[0]![1]);
    expect(s.expired(100 + HOUR, 10)).toEqual(['n:a']);
    expect(s.expired(300 + HOUR, 10)).toEqual(['n:a', 'c:1', 'v:1', 'n:b']);
  });
});
