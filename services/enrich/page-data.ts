/**
 * page.url and user.user_agent "from the event's session data": a web event's own page location and user agent;
 * what it lacks (always, for a server event) comes from the newest session data of its identity cluster. When
 * nothing is known, page.url is the empty string and user_agent is left out (docs/pipeline.md).
 */
import type { EventEnvelope } from '../domain/envelope.js';
import type { ClusterReader } from './identity/graph-repo.js';
import { pageDataOf } from './identity/identifiers.js';

export interface ResolvedPage {
  readonly url: string;
  readonly userAgent?: string;
  readonly source: 'event' | 'graph' | 'none';
}

export function resolvePage(graph: ClusterReader, e: EventEnvelope, clusterId: string | null): ResolvedPage {
  const own = pageDataOf(e);
  let url = own?.page_location ?? undefined;
  let userAgent = own?.user_agent ?? undefined;
  let source: ResolvedPage['source'] = url ? 'event' : 'none';
  if ((!url || !userAgent) && clusterId) {
    const known = graph.newestPageData(clusterId);
    if (!url && known?.page_location) {
      url = known.page_location;
      source = 'graph';
    }
    userAgent ??= known?.user_agent ?? undefined;
  }
  return { url: url ?? '', ...(userAgent ? { userAgent } : {}), source };
}
