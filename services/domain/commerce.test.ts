import { describe, expect, it } from 'vitest';
import { commerceFromPayload, propertiesOf } from './commerce.js';

describe('properties from the payload', () => {
  it.each([
    { name: 'commerce fields', payload: { value: 49.9, currency: 'EUR', transaction_id: 'T-1', other: 'x' }, expected: { value: 49.9, currency: 'EUR', order_id: 'T-1' } },
    { name: 'numeric string value', payload: { value: '19.99' }, expected: { value: 19.99 } },
    { name: 'order_id wins over transaction_id', payload: { order_id: 7, transaction_id: 'T' }, expected: { order_id: '7' } },
    { name: 'contents, content_type, description, query', payload: { contents: [{ content_id: 'a' }], content_type: 'product', description: 'd', query: 'q' },
      expected: { contents: [{ content_id: 'a' }], content_type: 'product', description: 'd', query: 'q' } },
    { name: 'nothing known', payload: { foo: 1 }, expected: undefined },
    { name: 'implausible types are left out', payload: { value: 'lots', currency: 3, contents: 'x', order_id: {} }, expected: undefined },
  ])('$name', ({ payload, expected }) => {
    expect(propertiesOf({ payload })).toEqual(expected);
    expect(propertiesOf({ payload, commerce: commerceFromPayload(payload) })).toEqual(expected);
  });
});
