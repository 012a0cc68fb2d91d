/** The Forwarding page's form → the admin API's setup body, with the same checks (settings-routes.ts). */
import { describe, expect, it } from 'vitest';
import { setupFromForm } from './settings-routes.js';

const base = { _csrf: 't', event_source: 'WEB', event_source_id: 'PIXEL123', pii_mode: 'hashed', click_window_days: '7', test_event_code: '' };

describe('setupFromForm', () => {
  it('takes the ticked rows with their platform events, and an extra named event', () => {
    const { input, problem } = setupFromForm({
      ...base,
      name_0: 'purchase', on_0: '1', to_0: 'CompletePayment',
      name_1: 'page_view', to_1: 'ViewContent', // not ticked: not forwarded
      extra_name: 'sign_up', extra_to: 'CompleteRegistration',
      test_event_code: ' TEST1 ',
    });
    expect(problem).toBeUndefined();
    expect(input).toEqual({
      event_source: 'WEB', event_source_id: 'PIXEL123', pii_mode: 'hashed', click_window_days: 7, test_event_code: 'TEST1',
      events: [{ name: 'purchase', platform_event: 'CompletePayment' }, { name: 'sign_up', platform_event: 'CompleteRegistration' }],
    });
  });

  it('an empty test event code means none', () => {
    expect(setupFromForm({ ...base }).input.test_event_code).toBeNull();
  });

  describe('bad input', () => {
    it.each([
      { name: 'a ticked row without its platform event', form: { ...base, name_0: 'purchase', on_0: '1', to_0: '' }, says: 'Choose the platform event for "purchase"' },
      { name: 'an extra name without a platform event', form: { ...base, extra_name: 'lead' }, says: 'Choose the platform event for "lead"' },
      { name: 'a platform event not on the list', form: { ...base, name_0: 'purchase', on_0: '1', to_0: 'Purchse' }, says: 'must be one of AddPaymentInfo' },
      { name: 'an event source not on the list', form: { ...base, event_source: 'web' }, says: 'event_source must be one of WEB, APP, OFFLINE, CRM' },
      { name: 'no pixel id', form: { ...base, event_source_id: '  ' }, says: 'event_source_id must not be empty' },
      { name: 'a PII mode not on the list', form: { ...base, pii_mode: 'plain' }, says: 'pii_mode must be one of hashed, none' },
      { name: 'a click window that is not a number', form: { ...base, click_window_days: 'a week' }, says: 'click_window_days must be an integer' },
      { name: 'a click window past 90 days', form: { ...base, click_window_days: '91' }, says: 'click_window_days' },
      { name: 'the same name twice', form: { ...base, name_0: 'purchase', on_0: '1', to_0: 'CompletePayment', extra_name: 'purchase', extra_to: 'Purchase' }, says: '"purchase" is listed more than once' },
    ])('$name', ({ form, says }) => {
      const { problem } = setupFromForm(form);
      expect(problem).toContain(says);
    });
  });
});
