import { describe, expect, it } from 'vitest';
import { compactExplanation, expandExplanation, type ConversionExplanation, type PlatformEventRecord } from './conversion.js';

const email1 = 'a'.repeat(64);
const email2 = 'b'.repeat(64);
const phone = 'c'.repeat(64);
const node = (kind: string) => ({ kind, first_seen_at: '2026-11-01T10:00:00.000Z', last_seen_at: '2026-11-20T10:00:00.000Z' });

const record: PlatformEventRecord = {
  event: 'CompletePayment',
  event_id: 'order-1',
  event_time: 1_764_000_000,
  limited_data_use: false,
  page: { url: 'https://shop.example/checkout?step=3' },
  user: { email: [email1, email2], phone: [phone], ttclid: 'E.C.P.click-1', user_agent: 'Mozilla/5.0 (X11; Linux x86_64)' },
  conversion_date_time: '2026-11-24 17:00:00+00:00',
  consent: { ad_user_data: 'GRANTED', ad_personalization: 'GRANTED' },
};

/** Shaped as enrich's explain() builds it: every value is one the record holds. */
const explanation: ConversionExplanation = {
  consent: { analytics_storage: 'GRANTED', ad_storage: 'GRANTED', ad_user_data: 'GRANTED', ad_personalization: 'GRANTED' },
  pii_mode: 'hashed',
  attribution: 'graph_click',
  limited_data_use: false,
  fields: [
    { field: 'user.email', sent: true, rule: 'graph_link', value: email1, graph_node: node('email_sha256') },
    { field: 'user.email', sent: true, rule: 'graph_link', value: email2, graph_node: node('email_canonical_sha256') },
    { field: 'user.phone', sent: true, rule: 'graph_link', value: phone, graph_node: node('phone_e164_sha256') },
    { field: 'user.external_id', sent: false, rule: 'none_offered' },
    { field: 'user.ttclid', sent: true, rule: 'graph_click', value: 'E.C.P.click-1' },
    { field: 'user.user_agent', sent: true, rule: 'event', value: 'Mozilla/5.0 (X11; Linux x86_64)' },
    { field: 'page.url', sent: true, rule: 'event', value: 'https://shop.example/checkout?step=3' },
  ],
};

describe('the explanation as carried (compactExplanation / expandExplanation)', () => {
  it('leaves out every value the record holds and gets each back in place, key order included', () => {
    const carried = compactExplanation(explanation, record);
    expect(carried.values_from_record).toBe(true);
    expect(carried.fields.every((f) => f.value === undefined)).toBe(true);
    const valueBytes = explanation.fields.reduce((n, f) => n + (f.value?.length ?? 0), 0);
    expect(JSON.stringify(explanation).length - JSON.stringify(carried).length).toBeGreaterThan(valueBytes);
    const back = expandExplanation(JSON.parse(JSON.stringify(carried)), record);
    expect(JSON.stringify(back)).toBe(JSON.stringify(explanation));
    // Compacting what is already compact (enrich builds it so; the filing and the Avro mapping compact again) keeps it.
    expect(compactExplanation(carried, record)).toBe(carried);
    expect(expandExplanation(compactExplanation(JSON.parse(JSON.stringify(carried)), record), record)).toStrictEqual(back);
  });

  it('keeps a value the record does not hold at that place', () => {
    const other = { ...explanation, fields: explanation.fields.map((f) => (f.field === 'user.ttclid' ? { ...f, value: 'E.C.P.other' } : f)) };
    const swapped = { ...explanation, fields: [explanation.fields[1]!, explanation.fields[0]!, ...explanation.fields.slice(2)] };
    for (const e of [other, swapped]) {
      const carried = compactExplanation(e, record);
      expect(carried.fields.filter((f) => f.value !== undefined).length).toBeGreaterThan(0);
      expect(expandExplanation(carried, record)).toStrictEqual(e);
    }
  });

  it('carries whole, unmarked, an explanation with a field lacking a value the record holds', () => {
    const { value: _url, ...pageWithoutValue } = explanation.fields[6]!;
    const e = { ...explanation, fields: [...explanation.fields.slice(0, 6), pageWithoutValue] };
    const carried = compactExplanation(e, record);
    expect(carried).toBe(e);
    expect(expandExplanation(carried, record)).toStrictEqual(e);
  });

  it('reads an unmarked explanation (stored before the compact form) as it is', () => {
    expect(expandExplanation(explanation, record)).toBe(explanation);
    const { value: _email, ...emailWithoutValue } = explanation.fields[0]!;
    const partial = { ...explanation, fields: [emailWithoutValue, ...explanation.fields.slice(1)] };
    expect(expandExplanation(partial, record)).toBe(partial);
  });

  it('a record without user data: the withheld fields need nothing, the page URL is left out and comes back', () => {
    const bare: PlatformEventRecord = { ...record, user: undefined, page: { url: '' } };
    const e: ConversionExplanation = {
      ...explanation,
      fields: [
        { field: 'user.email', sent: false, rule: 'ad_user_data_not_granted' },
        { field: 'user.ttclid', sent: false, rule: 'ad_storage_not_granted' },
        { field: 'page.url', sent: false, rule: 'none', value: '' },
      ],
    };
    const carried = compactExplanation(e, bare);
    expect(carried.fields.map((f) => f.value)).toEqual([undefined, undefined, undefined]);
    expect(expandExplanation(JSON.parse(JSON.stringify(carried)), bare)).toStrictEqual(e);
  });
});
