/** One event of an enrich batch, checked, with what its consent allows and the graph input that follows from it. */
import type { EventEnvelope } from '../domain/envelope.js';
import type { InputRecord } from '../stream/contract.js';
import type { ConsentDecision } from './consent.js';
import type { GraphScope } from './identity/graph-repo.js';
import type { GraphInput } from './identity/identifiers.js';

export interface EnrichItem {
  /** The record's position in its batch. */
  readonly position: number;
  readonly record: InputRecord<unknown>;
  readonly e: EventEnvelope;
  readonly consent: ConsentDecision;
  readonly scope: GraphScope;
  readonly graph: GraphInput;
}
