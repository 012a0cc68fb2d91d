/**
 * The forwarder's intake: a stage of the pipeline (stream/contract.ts) on conversions.ready, consumer group
 * `forwarder`, driven by either runtime like any other stage. Per batch, in the batch's transaction, it files each
 * conversion into the outbox of its connection (outbox-filing.ts, planIntake):
 *  - already in the sent ledger, or already waiting: dropped as a duplicate (a replay never sends twice);
 *  - the workspace disconnected: dropped and counted (disconnecting stops forwarding);
 *  - connected: queued for the sender;
 *  - needs_reauth, or never connected: queued and parked until the workspace connects;
 *  - unreadable: a dead letter on conversions.dlq (the forwarder's dead letters, with the reason).
 * Embedded, the filing commits with the offset; on Kafka it commits just before the offset (a batch filed again
 * finds its conversions queued or sent).
 */
import { Topics } from '../shared/topics.js';
import { drop, ok, type Outcome, type Stage } from '../stream/contract.js';
import { forwardedConversions } from './metrics.js';
import { fileIntoOutbox } from './outbox-filing.js';

export const INTAKE_GROUP = 'forwarder';

export function createForwarderIntake(deps: { readonly onQueued?: () => void; readonly now?: () => number } = {}): Stage<unknown, never> {
  const now = deps.now ?? Date.now;
  return {
    name: INTAKE_GROUP,
    input: Topics.conversionsReady,
    async processBatch(records, ctx) {
      const { counted, filed } = await fileIntoOutbox(
        ctx.sql,
        records.map((r) => ({ key: r.key, value: r.value, position: `partition ${r.partition} offset ${r.offset}` })),
        now(),
      );
      for (const c of counted) forwardedConversions.inc({ outcome: c.outcome, code: c.code });
      return filed.map((f, i): Outcome => {
        if (f.kind === 'queued') return ok();
        if (f.kind === 'dropped') return drop(f.reason);
        return ok({ topic: Topics.conversionsDlq, key: records[i]!.key, value: f.letter });
      });
    },
    afterCommit(outcomes) {
      // Wake the sender once its outbox has something new (filed conversions are ok outcomes without outputs).
      if (outcomes.some((o) => o.type === 'ok' && o.outputs.length === 0)) deps.onQueued?.();
    },
  };
}
