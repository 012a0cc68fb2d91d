import { describe, expect, it } from 'vitest';
import { MAX_AGE_SECONDS, validateEventsBody } from './validate.js';

const NOW = 1_780_000_000;
const H = 'a'.repeat(64);
const event = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
  event_name: 'Purchase',
  event_time: NOW - 60,
  event_id: 'e1',
  action_source: 'website',
  event_source_url: 'https://shop.example/checkout',
  user_data: { em: [H], client_user_agent: 'Mozilla/5.0' },
  custom_data: { value: 12.5, currency: 'EUR' },
  ...over,
});
const body = (...events: unknown[]) => ({ data: events });

describe('Meta stand-in: POST /{pixel_id}/events validation', () => {
  it.each([
    ['a full website purchase', body(event())],
    ['a store event without a URL or user agent', body(event({ action_source: 'physical_store', event_source_url: undefined, user_data: { ph: H } }))],
    ['fbc and fbp alone', body(event({ user_data: { fbc: 'fb.1.1780000000000.IwAR2x', fbp: 'fb.1.1780000000000.123', client_user_agent: 'UA' } }))],
    ['limited data use with country and state', body(event({ data_processing_options: ['LDU'], data_processing_options_country: 0, data_processing_options_state: 0 }))],
    ['no data processing options', body(event({ data_processing_options: [] }))],
    ['a test event code', { ...body(event()), test_event_code: 'TEST1' }],
    ['exactly 7 days old', body(event({ event_time: NOW - MAX_AGE_SECONDS }))],
    ['1000 events', body(...Array.from({ length: 1000 }, (_, i) => event({ event_id: `e${i}` })))],
    ['a lead without custom data', body(event({ event_name: 'Lead', custom_data: undefined }))],
  ])('accepts %s', (_name, b) => {
    expect(validateEventsBody(JSON.parse(JSON.stringify(b)), NOW)).toBeNull();
  });

  describe('bad input', () => {
    it.each([
      ['not an object', 'x', /JSON object/],
      ['no data', {}, /non-empty array/],
      ['empty data', body(), /non-empty array/],
      ['1001 events', body(...Array.from({ length: 1001 }, () => event())), /at most 1000 events \(got 1001\)/],
      ['a numeric test_event_code', { ...body(event()), test_event_code: 5 }, /test_event_code/],
      ['no event_name', body(event({ event_name: undefined })), /event_name/],
      ['event_time in milliseconds', body(event({ event_time: (NOW - 60) * 1000 })), /future/],
      ['event_time a string', body(event({ event_time: String(NOW) })), /Unix timestamp/],
      ['8 days old', body(event({ event_time: NOW - MAX_AGE_SECONDS - 86_400 })), /within 7 days/],
      ['an unknown action_source', body(event({ action_source: 'web' })), /action_source/],
      ['no user_data', body(event({ user_data: undefined })), /user_data parameter is required/],
      ['a website event without its URL', body(event({ event_source_url: undefined })), /event_source_url/],
      ['a website event without a user agent', body(event({ user_data: { em: [H] } })), /client_user_agent/],
      ['an email in clear', body(event({ user_data: { em: ['jane@example.com'], client_user_agent: 'UA' } })), /em must be hashed/],
      ['an upper-case hash', body(event({ user_data: { ph: H.toUpperCase(), client_user_agent: 'UA' } })), /ph must be hashed/],
      ['a malformed fbc', body(event({ user_data: { fbc: 'IwAR2x', client_user_agent: 'UA' } })), /fbc/],
      ['a malformed fbp', body(event({ user_data: { fbp: 'fb.1.x.y', client_user_agent: 'UA' } })), /fbp/],
      ['no customer information', body(event({ user_data: { client_user_agent: 'UA', em: [] } })), /at least one of/],
      ['an unknown processing option', body(event({ data_processing_options: ['GDPR'] })), /data_processing_options/],
      ['a string country', body(event({ data_processing_options: ['LDU'], data_processing_options_country: 'US' })), /country must be an integer/],
      ['a purchase without value', body(event({ custom_data: { currency: 'EUR' } })), /value and custom_data.currency/],
      ['a string value', body(event({ custom_data: { value: '12', currency: 'EUR' } })), /value must be a number/],
      ['one bad event among good ones', body(event(), event({ event_id: 'e2', action_source: 'x' }), event()), /action_source/],
    ])('refuses %s', (_name, b, message) => {
      const problem = validateEventsBody(b, NOW);
      expect(problem?.message).toMatch(message);
      expect(problem?.subcode).toBeGreaterThan(2804000 - 1);
    });
  });
});
