import { describe, expect, it } from 'vitest';
import { classify } from '../classify.js';
import type { PlatformAnswer } from '../platform-client.js';
import type { PlatformEventRecord } from '../../domain/conversion.js';
import { deliverBatch, type DeliveryHooks } from './deliver.js';
import { halves, type DestinationKind, type EventResult, type Outgoing } from './kind.js';

/**
 * A kind whose platform is a function of the batch: the loop is tested on its own, without a network. The kinds'
 * HTTP sides are tested against their sandboxes (sender.test.ts, meta.test.ts).
 */
function scripted(
  answer: (ids: string[], token: string) => Partial<PlatformAnswer>,
  opts: { results?: (ids: string[]) => EventResult[]; withhold?: (r: PlatformEventRecord) => string | null } = {},
): { kind: DestinationKind<{ ids: string[] }>; requests: string[][] } {
  const requests: string[][] = [];
  const kind: DestinationKind<{ ids: string[] }> = {
    name: 'tiktok',
    auth: 'oauth_refresh',
    batchLimit: 10,
    consent: (record) => {
      const why = opts.withhold?.(record) ?? null;
      return why === null ? { send: true, record } : { send: false, reason: why };
    },
    request: (_g, batch) => ({ ids: batch.map((b) => b.eventId) }),
    payloads: (body) => body.ids,
    match: () => ({ keys: [], quality: 0 }),
    send: async (token, body) => {
      requests.push(body.ids);
      return {
        endpoint: 'event_track',
        httpStatus: 200,
        transportError: null,
        code: 0,
        message: 'OK',
        requestId: 'r',
        data: {},
        retryAfterMs: null,
        ...answer(body.ids, token),
      };
    },
    classify,
    results: (batch) => opts.results?.(batch.map((b) => b.eventId)) ?? batch.map(() => ({ outcome: 'sent' as const })),
    isolate: (batch) => halves(batch),
  };
  return { kind, requests };
}

const rows = (...ids: string[]): Outgoing[] =>
  ids.map((id) => ({ eventId: id, record: { event: 'Purchase', event_id: id } as unknown as PlatformEventRecord }));

function recorder(token: { fresh: string | null } = { fresh: null }) {
  const log: string[] = [];
  /** One line per request: each event with its outcome and the answer's code for it. */
  const attempts: string[] = [];
  const ids = (b: Outgoing[]) => b.map((r) => r.eventId).join(',');
  const hooks: DeliveryHooks<Outgoing> = {
    attempted: async (a) => void attempts.push(a.map((x) => `${x.row.eventId}:${x.outcome}:${x.answer.code}`).join(' ')),
    sent: async (b) => void log.push(`sent ${ids(b)}`),
    refused: async (b, r) => void log.push(`refused ${ids(b)} ${r.code}`),
    withheld: async (b, reason) => void log.push(`withheld ${ids(b)} ${reason}`),
    retry: async (b) => void log.push(`retry ${ids(b)}`),
    tokenRefused: async (b, _a, again) => {
      log.push(`token ${ids(b)}${again ? ' again' : ''}`);
      return again ? null : token.fresh;
    },
  };
  return { log, attempts, hooks };
}
const group = { eventSource: 'WEB', eventSourceId: 'P', testEventCode: '' };

describe('deliverBatch', () => {
  it.each([
    ['an ok answer sends the batch in one request', () => scripted(() => ({})), 'a b c', ['sent a,b,c'], 1, 'done'],
    [
      'a batch refused for one record is narrowed down to it',
      () => scripted((ids) => (ids.includes('c') ? { code: 40002, message: 'invalid parameters' } : {})),
      'a b c d',
      ['sent a,b', 'refused c 40002', 'sent d'],
      5,
      'done',
    ],
    [
      'a refusal for the whole batch dead-letters it at once',
      () => scripted(() => ({ code: 40001, message: 'no permission' })),
      'a b',
      ['refused a,b 40001'],
      1,
      'done',
    ],
    ['a retryable answer stops with the batch kept', () => scripted(() => ({ httpStatus: 503, code: null })), 'a b', ['retry a,b'], 1, 'stopped'],
    [
      'per-event results of an ok answer settle each event on its own',
      () => scripted(() => ({}), { results: (ids) => ids.map((id) => (id === 'b' ? { outcome: 'refused' as const, code: 7, message: 'bad' } : { outcome: 'sent' as const })) }),
      'a b c',
      ['sent a,c', 'refused b 7'],
      1,
      'done',
    ],
    [
      'records the consent rules forbid are withheld, never sent',
      () => scripted(() => ({}), { withhold: (r) => (r.event_id === 'b' ? 'consent_denied' : null) }),
      'a b c',
      ['withheld b consent_denied', 'sent a,c'],
      1,
      'done',
    ],
  ])('%s', async (_name, make, ids, expected, requests, outcome) => {
    const { kind, requests: sent } = make();
    const { log, hooks } = recorder();
    expect(await deliverBatch(kind, group, 't', rows(...ids.split(' ')), hooks)).toBe(outcome);
    expect(log).toEqual(expected);
    expect(sent).toHaveLength(requests);
  });

  it('a refused token: resends once with the fresh one, and stops when that is refused too', async () => {
    const good = scripted((_ids, token) => (token === 'fresh' ? {} : { code: 40105, message: 'expired' }));
    const r1 = recorder({ fresh: 'fresh' });
    expect(await deliverBatch(good.kind, group, 'old', rows('a'), r1.hooks)).toBe('done');
    expect(r1.log).toEqual(['token a', 'sent a']);

    const bad = scripted(() => ({ code: 40105, message: 'expired' }));
    const r2 = recorder({ fresh: 'fresh' });
    expect(await deliverBatch(bad.kind, group, 'old', rows('a'), r2.hooks)).toBe('stopped');
    expect(r2.log).toEqual(['token a', 'token a again']);
    expect(bad.requests).toHaveLength(2);
  });

  it('reports every request\'s events once, with the outcome and the answer for each', async () => {
    const narrowed = scripted((ids) => (ids.includes('c') ? { code: 40002, message: 'invalid parameters' } : {}));
    const r1 = recorder();
    await deliverBatch(narrowed.kind, group, 't', rows('a', 'b', 'c', 'd'), r1.hooks);
    expect(r1.attempts).toEqual([
      'a:retrying:40002 b:retrying:40002 c:retrying:40002 d:retrying:40002',
      'a:sent:0 b:sent:0',
      'c:retrying:40002 d:retrying:40002',
      'c:refused:40002',
      'd:sent:0',
    ]);
    const perEvent = scripted(() => ({}), { results: (ids) => ids.map((id) => (id === 'b' ? { outcome: 'refused' as const, code: 7, message: 'bad' } : { outcome: 'sent' as const })) });
    const r2 = recorder();
    await deliverBatch(perEvent.kind, group, 't', rows('a', 'b'), r2.hooks);
    expect(r2.attempts).toEqual(['a:sent:0 b:refused:7']);
    const later = scripted(() => ({ httpStatus: 503, code: null }));
    const r3 = recorder();
    await deliverBatch(later.kind, group, 't', rows('a'), r3.hooks);
    expect(r3.attempts).toEqual(['a:retrying:null']);
  });

  it('scores each event from its payload before sending', async () => {
    const { kind } = scripted(() => ({}));
    const scored = { ...kind, match: (p: unknown) => ({ keys: [String(p)], quality: p === 'a' ? 4 : 1 }) };
    const seen: string[] = [];
    const { hooks } = recorder();
    await deliverBatch(scored, group, 't', rows('a', 'b'), { ...hooks, attempted: async (a) => void seen.push(...a.map((x) => `${x.payload} ${x.match.keys} ${x.match.quality}`)) });
    expect(seen).toEqual(['a a 4', 'b b 1']);
  });

  it('nothing sendable: no request at all', async () => {
    const { kind, requests } = scripted(() => ({}), { withhold: () => 'consent_denied' });
    const { log, hooks } = recorder();
    expect(await deliverBatch(kind, group, 't', rows('a'), hooks)).toBe('done');
    expect(requests).toHaveLength(0);
    expect(log).toEqual(['withheld a consent_denied']);
  });
});
