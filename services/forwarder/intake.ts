/**
 * The forwarder's intake: a stage (stream/contract.ts) on conversions.ready, consumer group `forwarder`. Per batch,
 * in the batch's transaction, it files each conversion into its connection's outbox (outbox-filing.ts): a duplicate
 * of a sent or waiting one is dropped (a replay never sends twice), a disconnected workspace's is dropped and
 * counted, a connected one's queued, a never-connected or needs_reauth one's parked, an unreadable one dead-lettered.
 * On Kafka the filing commits just before the offset, so a batch filed again finds its conversions queued or sent.
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
