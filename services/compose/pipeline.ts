/**
 * The order of the pipeline's stages, in one place. Each stage is a processor (see shared/runtime/types.ts);
 * the runtimes drive them: events.raw → dedupe → events.deduped → enrich → conversions.ready → forwarder.
 */
import { createDedupeProcessor } from '../dedupe/processor.js';
import { createEnrichProcessor } from '../enrich/processor.js';
import type { Processor } from '../stream/contract.js';

export interface PipelineDeps {
  readonly dedupeWindowMs: number;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyProcessor = Processor<any, any>;

export function pipelineStages(deps: PipelineDeps): AnyProcessor[] {
  return [createDedupeProcessor({ windowMs: deps.dedupeWindowMs }), createEnrichProcessor()];
}
