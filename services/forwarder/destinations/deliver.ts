/**
 * Delivering one batch to one destination, whatever its kind: consent first, then send; an ok answer settles each
 * event as the kind reads it (sent, or refused alone); a refusal the platform gives the whole request for one of
 * its records is narrowed down by resending the parts (kind.isolate) until the bad records stand alone. What to do
 * with each outcome (ledger, dead letters, backoff, re-authorisation) is the caller's, through the hooks.
 */
import type { Classification } from '../classify.js';
import type { PlatformAnswer } from '../platform-client.js';
import type { BatchGroup, DestinationKind, Outgoing } from './kind.js';
import type { MatchScore } from './match-quality.js';

export type RetryClassification = Extract<Classification, { kind: 'retry' }>;

/** The platform's answer as it concerns one event of a request. */
export interface EventAnswer {
  readonly http_status: number;
  readonly code: number | null;
  readonly message: string;
  readonly request_id: string | null;
}

/** One event's part in one request: the payload as sent, its match (scored before sending), what came of it. */
export interface Attempt<R extends Outgoing> {
  readonly row: R;
  readonly payload: unknown;
  readonly match: MatchScore;
  /** `retrying`: the request failed for now (retry later, the token, or a refusal being narrowed down). */
  readonly outcome: 'sent' | 'refused' | 'retrying';
  readonly answer: EventAnswer;
}

export interface DeliveryHooks<R extends Outgoing> {
  /** Every request's events, once its answer is acted on: the delivery records (delivery-repo.ts). */
  attempted(attempts: Attempt<R>[]): Promise<void>;
  /** The platform took these events. */
  sent(batch: R[], answer: PlatformAnswer): Promise<void>;
  /** The platform refused these events for good, with its code and message. */
  refused(batch: R[], refusal: { readonly code: number; readonly message: string }, answer: PlatformAnswer): Promise<void>;
  /** The platform's consent rules forbid sending these events there. */
  withheld(batch: R[], reason: string): Promise<void>;
  /** The platform asked to come back later; delivery stops, the batch stays queued. */
  retry(batch: R[], c: RetryClassification, answer: PlatformAnswer): Promise<void>;
  /**
   * The platform refused the token. Returns a fresh token to resend the batch with, or null to stop (the hook has
   * parked the connection or backed it off). `refreshedAlready`: this delivery already got a fresh token once.
   */
  tokenRefused(batch: R[], answer: PlatformAnswer, refreshedAlready: boolean): Promise<string | null>;
}

/** 'done': every event of the batch was settled; 'stopped': the rest waits (retry later, or the token). */
export async function deliverBatch<R extends Outgoing>(
  kind: DestinationKind,
  group: BatchGroup,
  accessToken: string,
  rows: readonly R[],
  hooks: DeliveryHooks<R>,
): Promise<'done' | 'stopped'> {
  const sendable: R[] = [];
  const withheld = new Map<string, R[]>();
  for (const row of rows) {
    const d = kind.consent(row.record);
    if (d.send) sendable.push(d.record === row.record ? row : { ...row, record: d.record });
    else withheld.set(d.reason, [...(withheld.get(d.reason) ?? []), row]);
  }
  for (const [reason, batch] of withheld) await hooks.withheld(batch, reason);

  const work: R[][] = sendable.length > 0 ? [sendable] : [];
  let token = accessToken;
  let refreshed = false;
  while (work.length > 0) {
    const batch = work.pop()!;
    const body = kind.request(group, batch);
    const payloads = kind.payloads(body);
    const matches = payloads.map((p) => kind.match(p));
    const answer = await kind.send(token, body);
    const c = kind.classify(answer);
    const whole: EventAnswer = { http_status: answer.httpStatus, code: answer.code, message: answer.message, request_id: answer.requestId };
    const attempts = (each: (i: number) => Pick<Attempt<R>, 'outcome' | 'answer'>): Attempt<R>[] =>
      batch.map((row, i) => ({ row, payload: payloads[i], match: matches[i]!, ...each(i) }));
    switch (c.kind) {
      case 'ok': {
        const results = kind.results(batch, answer);
        const sent = batch.filter((_, i) => results[i]?.outcome !== 'refused');
        if (sent.length > 0) await hooks.sent(sent, answer);
        for (const [i, r] of results.entries()) {
          if (r.outcome === 'refused') await hooks.refused([batch[i]!], r, answer);
        }
        await hooks.attempted(
          attempts((i) => {
            const r = results[i];
            return r?.outcome === 'refused' ? { outcome: 'refused', answer: { ...whole, code: r.code, message: r.message } } : { outcome: 'sent', answer: whole };
          }),
        );
        break;
      }
      case 'retry':
        await hooks.retry(batch, c, answer);
        await hooks.attempted(attempts(() => ({ outcome: 'retrying', answer: whole })));
        return 'stopped';
      case 'token': {
        const fresh = await hooks.tokenRefused(batch, answer, refreshed);
        await hooks.attempted(attempts(() => ({ outcome: 'retrying', answer: whole })));
        if (fresh === null) return 'stopped';
        refreshed = true;
        token = fresh;
        work.push(batch);
        break;
      }
      case 'permanent': {
        if (c.perRecord && batch.length > 1) {
          const [suspect, rest] = kind.isolate(batch, c);
          await hooks.attempted(attempts(() => ({ outcome: 'retrying', answer: whole })));
          work.push(rest, suspect);
          break;
        }
        await hooks.refused(batch, { code: c.code, message: c.message }, answer);
        await hooks.attempted(attempts(() => ({ outcome: 'refused', answer: { ...whole, code: c.code, message: c.message } })));
        break;
      }
    }
  }
  return 'done';
}
