/** The destination form → the admin API's setup, checked by its parseSetup, each problem keyed by its field. */
import { describe, expect, it } from 'vitest';
import { destinationFromForm, eventsFromForm } from './destination-form.js';

const meta = { dest_name: 'Meta pixel', pixel_id: '123', action_source: 'website', pii_mode: 'hashed', test_event_code: '' };
const google = { dest_name: 'Ads', customer_id: '1234567890', login_customer_id: '', conversion_action_id: '42', pii_mode: 'hashed', test_event_code: '' };

describe('destinationFromForm', () => {
  it('takes the ticked rows and the extra event; an empty optional field is absent', () => {
    const r = destinationFromForm('meta', { ...meta, name_0: 'purchase', on_0: '1', to_0: 'Purchase', name_1: 'page_view', to_1: 'ViewContent', extra_name: 'lead', extra_to: 'Lead' });
    expect(r.errors).toEqual({});
    expect(r.name).toBe('Meta pixel');
    expect(r.setup).toEqual({ pixel_id: '123', action_source: 'website', pii_mode: 'hashed', events: [{ name: 'purchase', platform_event: 'Purchase' }, { name: 'lead', platform_event: 'Lead' }] });
  });

  it('gives a Google setup its optional manager account only when filled', () => {
    expect(destinationFromForm('google', { ...google, extra_name: 'purchase', extra_to: 'purchase' }).setup).not.toHaveProperty('login_customer_id');
    expect(destinationFromForm('google', { ...google, login_customer_id: '9999999999', extra_name: 'purchase', extra_to: 'purchase' }).setup).toMatchObject({ login_customer_id: '9999999999' });
  });

  it('reports every schema problem at once, each under its field', () => {
    const r = destinationFromForm('google', { ...google, customer_id: '123-456-7890', conversion_action_id: 'x', extra_name: 'purchase', extra_to: 'purchase' });
    expect(r.setup).toBeUndefined();
    expect(r.errors).toEqual({
      customer_id: 'Must be the Google Ads customer id: 10 digits, no dashes.',
      conversion_action_id: 'Must be the conversion action id: digits.',
    });
  });

  describe('bad input', () => {
    it.each([
      { what: 'a blank name', kind: 'meta' as const, form: { ...meta, dest_name: '   ', extra_name: 'purchase', extra_to: 'Purchase' }, field: 'name', message: /Give a name of 1 to 200 characters/ },
      { what: 'no event', kind: 'meta' as const, form: meta, field: 'events', message: /Tick at least one event/ },
      { what: 'a ticked event without its platform event', kind: 'meta' as const, form: { ...meta, name_0: 'purchase', on_0: '1', to_0: '' }, field: 'event:purchase', message: /Choose the platform event for "purchase", or untick it/ },
      { what: 'a pixel id with letters', kind: 'meta' as const, form: { ...meta, pixel_id: 'px1', extra_name: 'purchase', extra_to: 'Purchase' }, field: 'pixel_id', message: /digits only/ },
      { what: 'an unknown action source', kind: 'meta' as const, form: { ...meta, action_source: 'billboard', extra_name: 'purchase', extra_to: 'Purchase' }, field: 'action_source', message: /Invalid option/ },
      { what: 'a platform event too long', kind: 'meta' as const, form: { ...meta, extra_name: 'purchase', extra_to: 'P'.repeat(101) }, field: 'event:purchase', message: /Too big/ },
      { what: 'an event listed twice', kind: 'meta' as const, form: { ...meta, name_0: 'purchase', on_0: '1', to_0: 'Purchase', extra_name: 'purchase', extra_to: 'Lead' }, field: 'events', message: /"purchase" is listed more than once/ },
      { what: 'a TikTok click window that is no number', kind: 'tiktok' as const, form: { dest_name: 'TT', event_source: 'WEB', event_source_id: 'PX', pii_mode: 'hashed', click_window_days: 'seven', extra_name: 'purchase', extra_to: 'CompletePayment' }, field: 'click_window_days', message: /Must be integer/ },
    ])('$what: refused under $field', ({ kind, form, field, message }) => {
      const r = destinationFromForm(kind, form);
      expect(r.setup).toBeUndefined();
      expect(r.errors[field]).toMatch(message);
    });
  });
});

describe('eventsFromForm', () => {
  it('keeps a ticked event without its platform event to show it back, and says what is missing', () => {
    const r = eventsFromForm({ name_0: 'purchase', on_0: '1', to_0: ' ', extra_name: 'lead', extra_to: '' });
    expect(r.events).toEqual([]);
    expect(r.ticked).toEqual([{ name: 'purchase', platform_event: '' }, { name: 'lead', platform_event: '' }]);
    expect([...r.problems.values()]).toEqual(['Choose the platform event for "purchase", or untick it.', 'Choose the platform event for "lead".']);
  });
});
