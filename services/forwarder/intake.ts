/**
 * The forwarder's intake: reads conversions.ready after the committed offset of consumer group `forwarder` and, in
 * ONE transaction with the new offset, files each conversion into the outbox of its connection. A crash either
 * commits a whole batch or none of it. Per conversion (planIntake):
 *  - already in the sent ledger, or already waiting: dropped as a duplicate (a replay never sends twice);
 *  - the workspace disconnected: dropped and counted (disconnecting stops forwarding);
 *  - connected: queued for the sender;
 *  - needs_reauth, or never connected: queued and parked until the workspace connects;
 *  - unreadable: dead-lettered on conversions.dlq.
 * An advisory lock serialises intake transactions, so on Postgres several forwarder replicas may run this loop.
 */
import type { Db } from '../shared/db/db.js';
import type { Logger } from '../shared/logger.js';
import type { EmbeddedLog, StoredRecord } from '../shared/runtime/embedded-log.js';
import { EmbeddedConsumerLoop } from '../shared/runtime/embedded-loop.js';
import { commitOffset, committedOffset } from '../shared/runtime/embedded-offsets.js';
import { Topics } from '../shared/topics.js';
import { forwardedConversions } from './metrics.js';
import { fileIntoOutbox, type IntakeCount } from './outbox-filing.js';

export const INTAKE_GROUP = 'forwarder';
const INTAKE_LOCK = 7_312_404;

export class ConversionIntake {
  private readonly loop: EmbeddedConsumerLoop;

  constructor(
    private readonly deps: {
      readonly db: Db;
      readonly log: EmbeddedLog;
      readonly logger: Logger;
      readonly batchSize?: number;
      readonly idleWaitMs?: number;
      /** Called after each committed batch that queued something (wakes the sender). */
      readonly onQueued?: () => void;
      readonly now?: () => number;
    },
  ) {
    this.loop = new EmbeddedConsumerLoop({
      log: deps.log,
      topic: Topics.conversionsReady,
      step: () => this.step(),
      idleWaitMs: deps.idleWaitMs,
      onError: (err) => deps.logger.error({ err }, 'forwarder intake failed; retrying'),
    });
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Files everything there is into the outbox (tests, shutdown). Returns how many records it consumed. */
  drain(): Promise<number> {
    return this.loop.drain();
  }

  /** One batch in one transaction. Returns how many conversions.ready records it consumed. */
  async step(): Promise<number> {
    const { db, log } = this.deps;
    const now = (this.deps.now ?? Date.now)();
    const counted: IntakeCount[] = [];
    let queued = 0;
    const consumed = await db.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock($1)', [INTAKE_LOCK]);
      const from = await committedOffset(tx, INTAKE_GROUP, Topics.conversionsReady);
      const batch: StoredRecord<unknown>[] = await log.read(Topics.conversionsReady, from, this.deps.batchSize ?? 500, tx);
      if (batch.length === 0) return 0;

      const filed = await fileIntoOutbox(
        tx,
        batch.map((r) => ({ key: r.key, value: r.value, position: `offset ${r.offset}` })),
        now,
      );
      counted.push(...filed.counted);
      queued = filed.queued;
      await commitOffset(tx, INTAKE_GROUP, Topics.conversionsReady, batch[batch.length - 1]!.offset);
      return batch.length;
    });
    for (const c of counted) forwardedConversions.inc({ outcome: c.outcome, code: c.code });
    if (queued > 0) this.deps.onQueued?.();
    return consumed;
  }
}
