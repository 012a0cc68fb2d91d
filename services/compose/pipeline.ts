/**
 * The order of the pipeline's stages, in one place. Each stage is a batch processor (stream/contract.ts); the
 * runtimes drive them: events.raw → dedupe → events.deduped → enrich → conversions.ready → forwarder (intake into
 * the outbox; the sender forwards from there).
 */
import { createDedupeProcessor } from '../dedupe/processor.js';
import { createEnrichProcessor } from '../enrich/processor.js';
import type { AnyStage } from '../stream/contract.js';

export interface PipelineDeps {
  readonly dedupeWindowMs: number;
  /** The forwarder's intake stage, when this process has the platform side's forwarder role. */
  readonly forwarderIntake?: AnyStage;
}

export function pipelineStages(deps: PipelineDeps): AnyStage[] {
  return [
    createDedupeProcessor({ windowMs: deps.dedupeWindowMs }),
    createEnrichProcessor(),
    ...(deps.forwarderIntake ? [deps.forwarderIntake] : []),
  ];
}
