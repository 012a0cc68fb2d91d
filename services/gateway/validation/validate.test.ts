import { describe, expect, it } from 'vitest';
import { serverEvent, sgtmEvent, sha256, webEvent } from '../../../test/helpers/factories.js';
import { API_VERSIONS, CURRENT_API_VERSION, firstViolation, toFieldPath, validateSgtm } from './validate.js';

const validateA = API_VERSIONS.get(CURRENT_API_VERSION)!.events;

/** Applies a mutation to a deep copy of the body. */
function mutate<T>(body: T, fn: (b: any) => void): T {
  const copy = structuredClone(body);
  fn(copy);
  return copy;
}

describe('endpoint A schema: valid bodies', () => {
  it.each([
    ['one web event', [webEvent()]],
    ['one server event', [serverEvent()]],
    ['mixed batch', [webEvent(), serverEvent(), webEvent()]],
    ['no identifiers at all', [mutate(webEvent(), (e) => (e.event_metadata.identifiers = {}))]],
    ['page_referrer given', [webEvent({ event_data: { page_referrer: 'https://ref.example/' } })]],
    ['upper-case hex digest', [mutate(webEvent(), (e) => (e.event_metadata.identifiers.email.sha256_email = sha256('a').toUpperCase()))]],
    ['canonical email hash', [mutate(webEvent(), (e) => (e.event_metadata.identifiers.email.sha256_canonical = sha256('a')))]],
    ['server payload with any fields', [serverEvent({ event_data: { anything: [1, 2, { x: true }] } })]],
    ['empty server payload', [mutate(serverEvent(), (e) => (e.event_data = {}))]],
    ['unknown extra fields are ignored', [{ ...webEvent(), extra: 1 }]],
    ['every consent value', [webEvent({ event_metadata: { consent: { analytics_storage: 'DENIED', ad_storage: 'UNSPECIFIED', ad_user_data: 'GRANTED', ad_personalization: 'DENIED' } } })]],
  ])('%s', (_name, body) => {
    expect(firstViolation(validateA, body)).toBeUndefined();
  });
});

describe('endpoint A schema: every field rule names its path', () => {
  const web = webEvent();
  const server = serverEvent();
  it.each<[string, unknown, string]>([
    ['body not an array', { events: [] }, 'body must be an array'],
    ['empty array', [], 'body must hold at least 1 event'],
    ['event not an object', [web, 'x'], '[1] must be an object'],
    ['event_name missing', [mutate(web, (e) => delete e.event_name)], '[0].event_name is required'],
    ['event_name empty', [mutate(web, (e) => (e.event_name = ''))], '[0].event_name must not be empty'],
    ['event_name not a string', [mutate(web, (e) => (e.event_name = 5))], '[0].event_name must be a string'],
    ['event_source missing', [mutate(web, (e) => delete e.event_source)], '[0].event_source is required'],
    ['event_source lower case', [mutate(web, (e) => (e.event_source = 'web'))], '[0].event_source must be one of WEB, SERVER'],
    ['event_source unknown', [mutate(web, (e) => (e.event_source = 'APP'))], '[0].event_source must be one of WEB, SERVER'],
    ['event_data missing', [mutate(web, (e) => delete e.event_data)], '[0].event_data is required'],
    ['event_data array', [mutate(server, (e) => (e.event_data = []))], '[0].event_data must be an object'],
    ['WEB without client_id', [mutate(web, (e) => delete e.event_data.client_id)], '[0].event_data.client_id is required'],
    ['WEB without session_id', [mutate(web, (e) => delete e.event_data.session_id)], '[0].event_data.session_id is required'],
    ['WEB without page_location', [mutate(web, (e) => delete e.event_data.page_location)], '[0].event_data.page_location is required'],
    ['WEB without user_agent', [mutate(web, (e) => delete e.event_data.user_agent)], '[0].event_data.user_agent is required'],
    ['WEB client_id not a string', [mutate(web, (e) => (e.event_data.client_id = 7))], '[0].event_data.client_id must be a string'],
    ['WEB page_referrer not a string', [mutate(web, (e) => (e.event_data.page_referrer = {}))], '[0].event_data.page_referrer must be a string'],
    ['event_metadata missing', [mutate(web, (e) => delete e.event_metadata)], '[0].event_metadata is required'],
    ['idempotency_key missing', [web, mutate(web, (e) => delete e.event_metadata.idempotency_key)], '[1].event_metadata.idempotency_key is required'],
    ['idempotency_key empty', [mutate(web, (e) => (e.event_metadata.idempotency_key = ''))], '[0].event_metadata.idempotency_key must not be empty'],
    ['identifiers missing', [mutate(web, (e) => delete e.event_metadata.identifiers)], '[0].event_metadata.identifiers is required'],
    ['identifiers not an object', [mutate(web, (e) => (e.event_metadata.identifiers = []))], '[0].event_metadata.identifiers must be an object'],
    ['identifiers.user not a string', [mutate(web, (e) => (e.event_metadata.identifiers.user = 1))], '[0].event_metadata.identifiers.user must be a string'],
    ['identifiers.organization not a string', [mutate(web, (e) => (e.event_metadata.identifiers.organization = true))], '[0].event_metadata.identifiers.organization must be a string'],
    ['email without sha256_email', [mutate(web, (e) => (e.event_metadata.identifiers.email = {}))], '[0].event_metadata.identifiers.email.sha256_email is required'],
    ['phone without numeric hash', [mutate(web, (e) => delete e.event_metadata.identifiers.phone.sha256_e164_numeric)], '[0].event_metadata.identifiers.phone.sha256_e164_numeric is required'],
    ['phone without e164 hash', [mutate(web, (e) => delete e.event_metadata.identifiers.phone.sha256_e164)], '[0].event_metadata.identifiers.phone.sha256_e164 is required'],
    ['consent missing', [mutate(web, (e) => delete e.event_metadata.consent)], '[0].event_metadata.consent is required'],
    ...(['analytics_storage', 'ad_storage', 'ad_user_data', 'ad_personalization'] as const).flatMap((f): Array<[string, unknown, string]> => [
      [`consent.${f} missing`, [mutate(web, (e) => delete e.event_metadata.consent[f])], `[0].event_metadata.consent.${f} is required`],
      [`consent.${f} boolean`, [mutate(web, (e) => (e.event_metadata.consent[f] = true))], `[0].event_metadata.consent.${f} must be a string`],
      [`consent.${f} unknown value`, [web, web, web, mutate(web, (e) => (e.event_metadata.consent[f] = 'YES'))], `[3].event_metadata.consent.${f} must be one of GRANTED, DENIED, UNSPECIFIED`],
    ]),
  ])('%s', (_name, body, detail) => {
    expect(firstViolation(validateA, body)?.message).toBe(detail);
  });
});

describe('endpoint A schema: hashed fields refuse plain personal data', () => {
  it.each([
    ['sha256_email', (e: any, v: string) => (e.event_metadata.identifiers.email.sha256_email = v)],
    ['sha256_canonical', (e: any, v: string) => (e.event_metadata.identifiers.email.sha256_canonical = v)],
    ['sha256_e164', (e: any, v: string) => (e.event_metadata.identifiers.phone.sha256_e164 = v)],
    ['sha256_e164_numeric', (e: any, v: string) => (e.event_metadata.identifiers.phone.sha256_e164_numeric = v)],
  ])('%s', (field, set) => {
    for (const bad of ['jane@example.com', '+4915112345678', sha256('x').slice(1), `${sha256('x')}0`, 'g'.repeat(64), '']) {
      const v = firstViolation(validateA, [mutate(webEvent(), (e) => set(e, bad))]);
      expect(v?.unhashed, `${field}=${bad}`).toBe(true);
      expect(v?.message).toContain(field);
      expect(v?.message).toContain('SHA-256');
    }
  });
});

describe('endpoint B schema', () => {
  it.each([
    ['one event', [sgtmEvent()]],
    ['several events', [sgtmEvent(), sgtmEvent({ event_name: 'page_view' })]],
    ['no identifiers', [mutate(sgtmEvent(), (e) => (e.event_metadata.identifiers = []))]],
    ['unknown alias type kept', [mutate(sgtmEvent(), (e) => e.event_metadata.identifiers.push({ alias_type: 'loyalty', loyalty_id: 'L1' }))]],
    ['upper-case hashed_email', [mutate(sgtmEvent(), (e) => (e.event_metadata.identifiers[2].hashed_email = sha256('q').toUpperCase()))]],
  ])('valid: %s', (_name, body) => {
    expect(firstViolation(validateSgtm, body)).toBeUndefined();
  });

  const ev = sgtmEvent();
  it.each<[string, unknown, string]>([
    ['not an array', {}, 'body must be an array'],
    ['empty array', [], 'body must hold at least 1 event'],
    ['event_name missing', [mutate(ev, (e) => delete e.event_name)], '[0].event_name is required'],
    ['event_payload missing', [mutate(ev, (e) => delete e.event_payload)], '[0].event_payload is required'],
    ['event_payload not an object', [mutate(ev, (e) => (e.event_payload = 'x'))], '[0].event_payload must be an object'],
    ['event_metadata missing', [mutate(ev, (e) => delete e.event_metadata)], '[0].event_metadata is required'],
    ['consent missing', [mutate(ev, (e) => delete e.event_metadata.consent)], '[0].event_metadata.consent is required'],
    ['consent as strings', [mutate(ev, (e) => (e.event_metadata.consent.ad_storage = 'GRANTED'))], '[0].event_metadata.consent.ad_storage must be a boolean (true or false)'],
    ['consent field missing', [mutate(ev, (e) => delete e.event_metadata.consent.ad_user_data)], '[0].event_metadata.consent.ad_user_data is required'],
    ['identifiers missing', [mutate(ev, (e) => delete e.event_metadata.identifiers)], '[0].event_metadata.identifiers is required'],
    ['identifiers not an array', [mutate(ev, (e) => (e.event_metadata.identifiers = {}))], '[0].event_metadata.identifiers must be an array'],
    ['identifier without alias_type', [mutate(ev, (e) => delete e.event_metadata.identifiers[0].alias_type)], '[0].event_metadata.identifiers[0].alias_type is required'],
    ['client without its id', [mutate(ev, (e) => delete e.event_metadata.identifiers[0].anonymous_client_id)], '[0].event_metadata.identifiers[0].anonymous_client_id is required'],
    ['user without user_id', [mutate(ev, (e) => delete e.event_metadata.identifiers[1].user_id)], '[0].event_metadata.identifiers[1].user_id is required'],
    ['email without hash', [mutate(ev, (e) => delete e.event_metadata.identifiers[2].hashed_email)], '[0].event_metadata.identifiers[2].hashed_email is required'],
  ])('invalid: %s', (_name, body, message) => {
    expect(firstViolation(validateSgtm, body)?.message).toBe(message);
  });

  it('refuses a plain email in hashed_email', () => {
    const v = firstViolation(validateSgtm, [mutate(ev, (e) => (e.event_metadata.identifiers[2].hashed_email = 'jane@example.com'))]);
    expect(v?.unhashed).toBe(true);
    expect(v?.path).toBe('[0].event_metadata.identifiers[2].hashed_email');
  });
});

describe('field paths', () => {
  it.each([
    ['', undefined, 'body'],
    ['', 'x', 'x'],
    ['/3/event_metadata/consent', 'ad_storage', '[3].event_metadata.consent.ad_storage'],
    ['/0/event_metadata/identifiers/2', undefined, '[0].event_metadata.identifiers[2]'],
    ['/0/a~1b', undefined, '[0].a/b'],
  ])('%s + %s → %s', (pointer, extra, expected) => {
    expect(toFieldPath(pointer, extra)).toBe(expected);
  });
});
