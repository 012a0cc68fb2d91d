/**
 * Enrich's store entries on the changelog (identity.graph-state): each kind round-trips (a cluster with its few click
 * ids and without, a cluster's click list), an entry written before click lists reads back with its click ids, and
 * the change is BACKWARD compatible.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import avro from 'avsc';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../repo-root.js';
import { identityStateMapping } from './avro-mapping.js';

const schema = JSON.parse(readFileSync(join(repoRoot(), 'schemas', 'identity-state.avsc'), 'utf8'));
const type = avro.Type.forSchema(schema);
const previous = avro.Type.forSchema({ ...schema, fields: schema.fields.filter((f: { name: string }) => f.name !== 'click_list') });
const roundTrip = (v: Record<string, unknown>) => identityStateMapping.fromAvro(type.fromBuffer(type.toBuffer(identityStateMapping.toAvro(v))));

const click = { kind: 'ttclid', value: 'E.C.P.1', first_seen_at: 1_000, last_seen_at: 2_000 };
const member = { kind: 'email_sha256', value: 'a'.repeat(64), first_seen_at: 1_000, last_seen_at: 3_000 };
const cluster = { into: null, members: [member], page_with_location: null, page_any: null, ad_storage_withdrawn_at: null, ad_user_data_withdrawn_at: null };

describe('identity-state schema', () => {
  it.each([
    ['an identifier', { cluster: 'c_1', first_seen_at: 1, last_seen_at: 2, page_location: 'https://shop.example/', user_agent: null, page_seen_at: 2 }],
    ['a cluster', cluster],
    ['a cluster holding its click ids', { ...cluster, clicks: [click] }],
    ['a forward', { ...cluster, members: [], into: 'c_2' }],
    ['a click list', { clicks: [click] }],
    ['a claim', { claimed_at: 5 }],
  ])('round-trips %s', (_name, v) => {
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

  it('adds click_list last, optional with default null (BACKWARD compatible)', () => {
    expect(schema.fields.at(-1)).toMatchObject({ name: 'click_list', default: null });
    expect(schema.fields.at(-1).type[0]).toBe('null');
    expect(() => type.createResolver(previous)).not.toThrow();
  });
});
