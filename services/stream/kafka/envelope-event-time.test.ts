/**
 * The envelope's optional fields added after its first version (event_time; graph_erasure, set only on erasure
 * records; the typed click_ids and commerce): they round-trip, envelopes without them come back without them, and
 * each change is BACKWARD compatible (records written with the schema before it read with the new one).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import avro from 'avsc';
import { describe, expect, it } from 'vitest';
import { serverEvent, webEvent } from '../../../test/helpers/factories.js';
import { fromA } from '../../../test/helpers/envelopes.js';
import { repoRoot } from '../../shared/repo-root.js';
import { clickIdsOf } from '../../domain/click-id.js';
import { commerceOf } from '../../domain/commerce.js';
import { envelopeMapping } from './avro-mapping.js';

const schema = JSON.parse(readFileSync(join(repoRoot(), 'schemas', 'event-envelope.avsc'), 'utf8'));
const type = avro.Type.forSchema(schema);
const ADDED = ['event_time', 'graph_erasure', 'click_ids', 'commerce'];
const previous = avro.Type.forSchema({ ...schema, fields: schema.fields.filter((f: { name: string }) => !ADDED.includes(f.name)) });
const roundTrip = (e: object) => envelopeMapping.fromAvro(type.fromBuffer(type.toBuffer(envelopeMapping.toAvro(e as never))));

describe('event_time in the envelope schema', () => {
  it.each([
    ['with an event time', { event_time: 1_764_000_000_123 }],
    ['without one', {}],
    ['that is an erasure record', { graph_erasure: { erasure_id: 'era_1', node_keys: ['s\u001fabc'] } }],
    ['with click ids and commerce', { click_ids: { ttclid: 'T1', gbraid: 'G' }, commerce: { value: 9.5, currency: 'EUR', contents: [{ content_id: 'a', quantity: 2 }], order_id: '7' } }],
    ['written before the typed fields', { click_ids: undefined, commerce: undefined }],
  ])('round-trips an envelope %s', (_name, extra) => {
    const e = { ...fromA([serverEvent()])[0]!, ...extra };
    expect(roundTrip(e)).toStrictEqual(JSON.parse(JSON.stringify(e)));
  });

  it('adds optional fields with default null, last (BACKWARD compatible)', () => {
    expect(schema.fields.slice(-ADDED.length).map((f: { name: string; default: unknown; type: unknown[] }) => [f.name, f.default, f.type[0]])).toEqual(
      ADDED.map((name) => [name, null, 'null']),
    );
    expect(schema.fields.at(-4)).toMatchObject({ name: 'event_time', type: ['null', 'long'], default: null });
    const e = fromA([webEvent({ event_data: { page_location: 'https://shop.example/?ttclid=T9', value: '12.5', currency: 'USD', transaction_id: 88 } })])[0]!;
    expect(e.click_ids).toEqual({ ttclid: 'T9' });
    const { event_time: _none, graph_erasure: _erasure, click_ids: _clicks, commerce: _commerce, ...old } = envelopeMapping.toAvro(e);
    const bytes = previous.toBuffer(old);
    const read = envelopeMapping.fromAvro(type.fromBuffer(bytes, type.createResolver(previous)));
    const { click_ids: _c, commerce: _m, ...withoutTyped } = JSON.parse(JSON.stringify(e));
    expect(read).toStrictEqual(withoutTyped);
    // An envelope written before the typed fields gives the stages what the gateway would have typed.
    expect(clickIdsOf(read)).toEqual(e.click_ids);
    expect(commerceOf(read)).toEqual(e.commerce);
    expect(commerceOf(read)).toEqual({ value: 12.5, currency: 'USD', order_id: '88' });
  });
});
