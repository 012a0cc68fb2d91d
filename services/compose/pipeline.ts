/**
 * The order of the pipeline's stages, in one place. Each stage is a batch processor (stream/contract.ts); the
 * runtimes drive them: events.raw → dedupe → events.deduped → enrich → conversions.ready → forwarder (intake into
 * the outbox; the sender forwards from there). Beside enrich, the graph sink writes identity.graph-changes to the
 * identity graph's queryable tables.
 */
import { createDedupeProcessor } from '../dedupe/processor.js';
import { createGraphSinkStage, GRAPH_SINK_STAGE } from '../enrich/identity/graph-sink.js';
import { createEnrichProcessor, ENRICH_STAGE } from '../enrich/processor.js';
import type { AnyStage } from '../stream/contract.js';

/**
 * The SERVICE_ROLE that runs a stage on Kafka: its own name, but for the graph sink, which runs where GRAPH_SINK_ROLE
 * says (beside enrich by default, or in `identity-sink` processes of its own).
 */
export const roleOfStage = (stage: string, graphSinkRole: 'enrich' | 'identity-sink' = ENRICH_STAGE): string =>
  stage === GRAPH_SINK_STAGE ? graphSinkRole : stage;

export interface PipelineDeps {
  readonly dedupeWindowMs: number;
  /** IDENTITY_GRAPH_RETENTION_DAYS: how long enrich's state keeps an identifier not seen again. */
  readonly graphRetentionMs?: number;
  /** The forwarder's intake stage, when this process has the platform side's forwarder role. */
  readonly forwarderIntake?: AnyStage;
}

export function pipelineStages(deps: PipelineDeps): AnyStage[] {
  return [
    createDedupeProcessor({ windowMs: deps.dedupeWindowMs }),
    createEnrichProcessor({ graphRetentionMs: deps.graphRetentionMs, dedupeWindowMs: deps.dedupeWindowMs }),
    createGraphSinkStage(),
    ...(deps.forwarderIntake ? [deps.forwarderIntake] : []),
  ];
}
