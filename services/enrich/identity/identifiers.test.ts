import { describe, expect, it } from 'vitest';
import { sha256, sgtmEvent } from '../../../test/helpers/factories.js';
import { fromB, webEnvelope } from '../../../test/helpers/envelopes.js';
import { consentDecision } from '../consent.js';
import { graphInputOf, isJunk, pageDataOf } from './identifiers.js';

const kinds = (e: ReturnType<typeof webEnvelope>) => graphInputOf(e, consentDecision(e.consent)).nodes.map((x) => x.kind);

describe('graph input of an event', () => {
  it('takes every identifier and the URL click id, best first; the session id is none', () => {
    const e = webEnvelope({ event_metadata: { identifiers: { organization: 'acme' } } });
    expect(kinds(e)).toEqual([
      'user_id', 'email_sha256', 'phone_e164_sha256', 'phone_numeric_sha256', 'client_id', 'ttclid', 'organization',
    ]);
    expect(graphInputOf(e, consentDecision(e.consent)).nodes.find((x) => x.kind === 'ttclid')?.value).toBe('E.C.P.abc123');
  });

  it.each([
    { flag: 'ad_storage', value: 'DENIED', kept: [], reason: 'consent_ad_storage' },
    { flag: 'ad_storage', value: 'UNSPECIFIED', kept: [], reason: 'consent_ad_storage' },
    { flag: 'ad_user_data', value: 'DENIED', kept: ['client_id', 'ttclid'], reason: 'consent_ad_user_data' },
    { flag: 'ad_user_data', value: 'UNSPECIFIED', kept: ['client_id', 'ttclid'], reason: 'consent_ad_user_data' },
  ])('$flag $value keeps $kept', ({ flag, value, kept, reason }) => {
    const e = webEnvelope({ event_metadata: { consent: { [flag]: value } } });
    const input = graphInputOf(e, consentDecision(e.consent));
    expect(input.nodes.map((x) => x.kind)).toEqual(kept);
    expect(input.skipped.length).toBeGreaterThan(0);
    expect(new Set(input.skipped.map((s) => s.reason))).toEqual(new Set([reason]));
  });

  it.each([
    { name: 'placeholder client id', over: { event_data: { client_id: 'undefined' } }, gone: 'client_id' },
    { name: 'placeholder user id', over: { event_metadata: { identifiers: { user: 'null' } } }, gone: 'user_id' },
    { name: 'hash of an empty email', over: { event_metadata: { identifiers: { email: { sha256_email: sha256('') } } } }, gone: 'email_sha256' },
    { name: 'hash of "undefined"', over: { event_metadata: { identifiers: { email: { sha256_email: sha256('undefined') } } } }, gone: 'email_sha256' },
  ])('drops junk: $name', ({ over, gone }) => {
    const e = webEnvelope(over as never);
    const input = graphInputOf(e, consentDecision(e.consent));
    expect(input.nodes.map((x) => x.kind)).not.toContain(gone);
    expect(input.skipped).toContainEqual({ kind: gone, reason: 'junk' });
  });

  it('refuses a hashed kind whose value is not a SHA-256 digest', () => {
    expect(isJunk('email_sha256', 'jane@example.com')).toBe(true);
    expect(isJunk('email_sha256', sha256('jane@example.com'))).toBe(false);
    expect(isJunk('client_id', 'x'.repeat(513))).toBe(true);
  });

  it('endpoint B: known aliases become nodes, unknown ones are skipped (meaning unknown)', () => {
    const [e] = fromB([sgtmEvent({ event_metadata: { identifiers: [
      { alias_type: 'client', anonymous_client_id: 'anon-1' },
      { alias_type: 'email', hashed_email: sha256('a@b.c') },
      { alias_type: 'loyalty', loyalty_id: 'L-1' },
    ] } })]);
    const input = graphInputOf(e!, consentDecision(e!.consent));
    expect(input.nodes.map((x) => x.kind)).toEqual(['email_sha256', 'client_id']);
    expect(input.skipped).toEqual([{ kind: 'loyalty', reason: 'unsupported_kind' }]);
  });

  it('the other platforms\' click ids of the URL join the graph beside ttclid, under the same consent', () => {
    const page_location = 'https://shop.example/p?ttclid=T1&fbclid=IwAR1&gclid=Cj0&wbraid=W1';
    const e = webEnvelope({ event_data: { page_location } });
    const nodes = graphInputOf(e, consentDecision(e.consent)).nodes.filter((n) => n.kind !== 'user_id' && !n.kind.includes('sha256') && n.kind !== 'client_id');
    expect(nodes).toEqual([
      { kind: 'ttclid', value: 'T1' },
      { kind: 'fbclid', value: 'IwAR1' },
      { kind: 'gclid', value: 'Cj0' },
      { kind: 'wbraid', value: 'W1' },
    ]);
    const denied = webEnvelope({ event_data: { page_location }, event_metadata: { consent: { ad_storage: 'DENIED' } } });
    const input = graphInputOf(denied, consentDecision(denied.consent));
    expect(input.nodes).toEqual([]);
    expect(input.skipped.filter((s) => ['fbclid', 'gclid', 'wbraid'].includes(s.kind)).map((s) => s.reason)).toEqual(['consent_ad_storage', 'consent_ad_storage', 'consent_ad_storage']);
  });

  it('a URL without ttclid gives no click id; a malformed URL neither', () => {
    for (const page_location of ['https://shop.example/', 'not a url', 'https://x.example/?ttclid=']) {
      expect(kinds(webEnvelope({ event_data: { page_location } }))).not.toContain('ttclid');
    }
  });

  it('page data: the web event\'s page location and user agent; none for a server event', () => {
    expect(pageDataOf(webEnvelope({ event_data: { page_location: 'https://a.example/p', user_agent: 'UA' } }))).toEqual({
      page_location: 'https://a.example/p',
      user_agent: 'UA',
    });
    expect(pageDataOf({ ...webEnvelope(), session: null })).toBeNull();
  });
});
