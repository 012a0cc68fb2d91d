import type { EventEnvelope } from '../domain/envelope.js';
import type { GraphScope } from './identity/graph-repo.js';

/** Live and test traffic of a workspace are kept apart everywhere enrich keeps state. */
export const scopeOf = (e: Pick<EventEnvelope, 'workspace_id' | 'key_mode'>): GraphScope => ({
  workspaceId: e.workspace_id,
  keyMode: e.key_mode,
});
