/**
 * The envelope's optional event_time in Avro (issue 12): it round-trips, envelopes without it come back without it,
 * and the schema change is BACKWARD compatible (records written with the previous schema read with the new one).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import avro from 'avsc';
import { describe, expect, it } from 'vitest';
import { serverEvent } from '../../../test/helpers/factories.js';
import { fromA } from '../../../test/helpers/envelopes.js';
import { repoRoot } from '../repo-root.js';
import { envelopeMapping } from './avro-mapping.js';

const schema = JSON.parse(readFileSync(join(repoRoot(), 'schemas', 'event-envelope.avsc'), 'utf8'));
const type = avro.Type.forSchema(schema);
const previous = avro.Type.forSchema({ ...schema, fields: schema.fields.filter((f: { name: string }) => f.name !== 'event_time') });
const roundTrip = (e: object) => envelopeMapping.fromAvro(type.fromBuffer(type.toBuffer(envelopeMapping.toAvro(e as never))));

describe('event_time in the envelope schema', () => {
  it.each([
    ['with an event time', { event_time: 1_764_000_000_123 }],
    ['without one', {}],
  ])('round-trips an envelope %s', (_name, extra) => {
    const e = { ...fromA([serverEvent()])[0]!, ...extra };
    expect(roundTrip(e)).toStrictEqual(JSON.parse(JSON.stringify(e)));
  });

  it('is an optional field with default null, last (BACKWARD compatible)', () => {
    const field = schema.fields.at(-1);
    expect(field).toMatchObject({ name: 'event_time', type: ['null', 'long'], default: null });
    const e = fromA([serverEvent()])[0]!;
    const { event_time: _none, ...old } = envelopeMapping.toAvro(e);
    const bytes = previous.toBuffer(old);
    const read = type.fromBuffer(bytes, type.createResolver(previous));
    expect(envelopeMapping.fromAvro(read)).toStrictEqual(JSON.parse(JSON.stringify(e)));
  });
});
