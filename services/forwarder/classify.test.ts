import { describe, expect, it } from 'vitest';
import { classify, codeLabel } from './classify.js';
import { parseEnvelope, type PlatformAnswer } from './platform-client.js';

/** An answer as the client would build it from an HTTP status and a raw body. */
function answer(httpStatus: number, body: string, extra: Partial<PlatformAnswer> = {}): PlatformAnswer {
  return { endpoint: 'event_track', httpStatus, transportError: null, retryAfterMs: null, ...parseEnvelope(body), ...extra };
}
const env = (code: number, message = 'm'): string => JSON.stringify({ code, message, request_id: 'r1', data: {} });

describe('classify', () => {
  it.each([
    ['code 0 under 200', 200, env(0), 'ok', '0'],
    ['40100 too many requests', 200, env(40100), 'retry', '40100'],
    ['HTTP 429', 429, env(40100), 'retry', '40100'],
    ['HTTP 429 with a success code', 429, env(0), 'retry', '0'],
    ['HTTP 503 with code 50002', 503, env(50002), 'retry', '50002'],
    ['HTTP 500 with a permanent code', 500, env(40002), 'retry', '40002'],
    ['code 50000 under 200', 200, env(50000), 'retry', '50000'],
    ['HTTP 408', 408, env(40002), 'retry', '40002'],
    ['40102 expired token', 200, env(40102), 'token', '40102'],
    ['40104 empty token', 200, env(40104), 'token', '40104'],
    ['40105 invalid or revoked token', 200, env(40105), 'token', '40105'],
    ['40107 expired refresh token', 200, env(40107), 'token', '40107'],
    ['40108 refresh token rotated away', 200, env(40108), 'token', '40108'],
    ['40114 token problem', 200, env(40114), 'token', '40114'],
    ['40105 under HTTP 401', 401, env(40105), 'token', '40105'],
    ['40002 invalid parameters', 200, env(40002), 'permanent', '40002'],
    ['40001 no permission', 200, env(40001), 'permanent', '40001'],
    ['40101 app credentials', 200, env(40101), 'permanent', '40101'],
    ['40002 under HTTP 400', 400, env(40002), 'permanent', '40002'],
    ['an unknown nonzero code', 200, env(12345), 'permanent', '12345'],
  ])('%s → %s', (_name, status, body, kind, label) => {
    const a = answer(status, body);
    expect(classify(a).kind).toBe(kind);
    expect(codeLabel(a)).toBe(label);
  });

  it('marks only 40002 as a per-record rejection and keeps the platform message', () => {
    expect(classify(answer(200, env(40002, 'data[3].event: unknown')))).toEqual({
      kind: 'permanent',
      reason: '40002',
      code: 40002,
      message: 'data[3].event: unknown',
      perRecord: true,
    });
    expect(classify(answer(200, env(40001)))).toMatchObject({ perRecord: false });
  });

  it('carries Retry-After into a retry', () => {
    expect(classify(answer(429, env(40100), { retryAfterMs: 2000 }))).toEqual({ kind: 'retry', reason: 'http_429', retryAfterMs: 2000 });
  });

  it.each([
    ['a timeout', 'timeout'],
    ['a network error', 'network'],
  ] as const)('retries after %s', (_name, transportError) => {
    const a: PlatformAnswer = { ...answer(0, ''), transportError };
    expect(classify(a)).toMatchObject({ kind: 'retry', reason: transportError });
    expect(codeLabel(a)).toBe(transportError);
  });

  describe('bad input: garbage from the platform is retried, never dead-lettered', () => {
    it.each([
      ['an HTML error page under 502', 502, '<html><body><h1>502 Bad Gateway</h1></body></html>', 'http_502'],
      ['an HTML page under 200', 200, '<!doctype html><p>maintenance</p>', 'unparseable'],
      ['an HTML page under 404', 404, '<html>Not Found</html>', 'unparseable'],
      ['an empty body', 200, '', 'unparseable'],
      ['truncated JSON', 200, '{"code": 0, "mess', 'unparseable'],
      ['JSON null', 200, 'null', 'unparseable'],
      ['a JSON array', 200, '[0]', 'unparseable'],
      ['a string code', 200, '{"code": "0", "message": "OK"}', 'unparseable'],
      ['a missing code', 200, '{"message": "OK", "data": {}}', 'unparseable'],
      ['a negative code', 200, '{"code": -1}', 'unparseable'],
      ['a fractional code', 200, '{"code": 0.5}', 'unparseable'],
      ['code 0 under HTTP 400', 400, env(0), 'http_400'],
    ])('%s', (_name, status, body, reason) => {
      expect(classify(answer(status, body))).toMatchObject({ kind: 'retry', reason });
    });
  });
});
