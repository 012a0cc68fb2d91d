import { describe, expect, it } from 'vitest';
import { parseAdvertiserTimeZone, parseEnvelope, parseRetryAfter, parseTokenGrant, PlatformClient, PlatformNotConfiguredError } from './platform-client.js';

describe('parseEnvelope', () => {
  it('reads the envelope', () => {
    expect(parseEnvelope('{"code":0,"message":"OK","request_id":"abc","data":{"x":1}}')).toEqual({
      code: 0,
      message: 'OK',
      requestId: 'abc',
      data: { x: 1 },
    });
  });

  describe('bad input', () => {
    it.each([
      ['an HTML page', '<html><head><title>Bad Gateway</title></head><body>oops</body></html>', /^not JSON: Bad Gateway oops$/],
      ['an empty body', '', /^empty body$/],
      ['whitespace', '  \n', /^empty body$/],
      ['a number', '42', /^not a JSON object/],
      ['an object without a code', '{"error":"x"}', /^no numeric code/],
      ['a very long page', `<p>${'x'.repeat(5000)}</p>`, /^not JSON: x{120}…$/],
    ])('%s', (_name, body, message) => {
      const e = parseEnvelope(body);
      expect(e.code).toBeNull();
      expect(e.message).toMatch(message);
    });

    it('keeps only string request ids and numeric codes', () => {
      expect(parseEnvelope('{"code":40002,"message":5,"request_id":7}')).toEqual({ code: 40002, message: '', requestId: null, data: null });
    });
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2030-01-01T00:00:00Z');
  it.each([
    ['3', 3000],
    ['0', 0],
    [' 10 ', 10_000],
    ['99999', 15 * 60_000],
    ['Tue, 01 Jan 2030 00:00:05 GMT', 5000],
    ['Mon, 31 Dec 2029 23:59:00 GMT', 0],
  ])('%j → %i ms', (value, ms) => {
    expect(parseRetryAfter(value, now)).toBe(ms);
  });
  it.each([[null], ['soon'], ['-1'], ['1.5'], ['']])('bad input %j → null', (value) => {
    expect(parseRetryAfter(value, now)).toBeNull();
  });
});

describe('parseTokenGrant', () => {
  it('reads an expiring grant with a refresh token', () => {
    expect(
      parseTokenGrant({ access_token: 'a', advertiser_ids: ['1', 2], scope: [1, 'x'], expires_in: 86400, refresh_token: 'r', refresh_token_expires_in: 9 }),
    ).toEqual({ accessToken: 'a', advertiserIds: ['1', '2'], scope: ['1', 'x'], expiresIn: 86400, refreshToken: 'r', refreshExpiresIn: 9 });
  });
  it('reads a non-expiring grant', () => {
    expect(parseTokenGrant({ access_token: 'a', advertiser_ids: ['1'] })).toMatchObject({ expiresIn: undefined, refreshToken: undefined });
  });
  describe('bad input', () => {
    it.each([
      ['no data', null],
      ['a list', []],
      ['no access token', { advertiser_ids: ['1'] }],
      ['an empty access token', { access_token: '' }],
      ['a numeric access token', { access_token: 5 }],
      ['a string expires_in', { access_token: 'a', expires_in: '3600' }],
      ['a negative expires_in', { access_token: 'a', expires_in: -1 }],
      ['advertiser ids that are objects', { access_token: 'a', advertiser_ids: [{}] }],
    ])('%s', (_name, data) => {
      expect(typeof parseTokenGrant(data)).toBe('string');
    });
  });
});

describe('parseAdvertiserTimeZone', () => {
  it('reads the advertiser asked for', () => {
    const data = { list: [{ advertiser_id: '2', timezone: 'UTC' }, { advertiser_id: '1', timezone: 'Europe/Berlin' }] };
    expect(parseAdvertiserTimeZone(data, '1')).toBe('Europe/Berlin');
  });
  describe('bad input', () => {
    it.each([
      ['no list', {}],
      ['an empty list', { list: [] }],
      ['no time zone', { list: [{ advertiser_id: '1' }] }],
      ['a time zone that is not IANA', { list: [{ advertiser_id: '1', timezone: 'Mars/Olympus' }] }],
      ['not an object', 'x'],
    ])('%s', (_name, data) => {
      expect(parseAdvertiserTimeZone(data, '1')).toHaveProperty('error');
    });
  });
});

describe('PlatformClient', () => {
  const base = { apiBase: 'http://platform.test/open_api/v1.3', appId: 'app', appSecret: 'sec', timeoutMs: 200 };

  it('sends the token in the Access-Token header and the app credentials in the body', async () => {
    const seen: Array<{ url: string; init: RequestInit }> = [];
    const client = new PlatformClient({
      ...base,
      fetch: async (url, init) => {
        seen.push({ url: String(url), init: init! });
        return new Response('{"code":0,"message":"OK","request_id":"r","data":{}}', { headers: { 'retry-after': '2' } });
      },
    });
    const a = await client.track('tok', { event_source: 'WEB', event_source_id: 'P', data: [] });
    expect(a).toMatchObject({ httpStatus: 200, code: 0, requestId: 'r', retryAfterMs: 2000, transportError: null });
    expect(seen[0]!.url).toBe('http://platform.test/open_api/v1.3/event/track/');
    expect((seen[0]!.init.headers as Record<string, string>)['access-token']).toBe('tok');
    await client.refresh('rt');
    expect(JSON.parse(String(seen[1]!.init.body))).toEqual({ app_id: 'app', secret: 'sec', refresh_token: 'rt' });
    await client.advertiserInfo('tok', ['7']);
    expect(seen[2]!.url).toBe(`http://platform.test/open_api/v1.3/advertiser/info/?advertiser_ids=${encodeURIComponent('["7"]')}`);
  });

  it('turns a hung call into a timeout answer', async () => {
    const client = new PlatformClient({
      ...base,
      fetch: (_url, init) =>
        new Promise((_resolve, reject) => init!.signal!.addEventListener('abort', () => reject(init!.signal!.reason))),
    });
    const a = await client.track('tok', { event_source: 'WEB', event_source_id: 'P', data: [] });
    expect(a).toMatchObject({ httpStatus: 0, transportError: 'timeout', code: null });
  });

  it('turns a refused connection into a network answer', async () => {
    const client = new PlatformClient({ ...base, apiBase: 'http://127.0.0.1:1/open_api/v1.3' });
    const a = await client.revoke('tok');
    expect(a).toMatchObject({ httpStatus: 0, transportError: 'network', code: null });
  });

  it('refuses app calls without the app credentials', async () => {
    const client = new PlatformClient({ ...base, appId: undefined, appSecret: undefined });
    expect(client.configured).toBe(false);
    expect(() => client.exchangeCode('c', 'v')).toThrow(PlatformNotConfiguredError);
  });
});
