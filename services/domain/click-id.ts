/**
 * Click ids read from the page URL's query string: TikTok's `ttclid` (the operator contract), and the other
 * destinations' own: Meta's `fbclid` (sent to Meta as `fbc`), Google's `gclid`, `gbraid` and `wbraid`. Each goes
 * only to its own platform (forwarder/destinations).
 */
import { CLICK_ID_PARAMS, type ClickIdParam, type ClickIds, type EventEnvelope } from './envelope.js';

const MAX_CLICK_ID_LENGTH = 512;

function paramsOf(pageLocation: string | undefined): URLSearchParams | undefined {
  if (!pageLocation) return undefined;
  try {
    return new URL(pageLocation).searchParams;
  } catch {
    return undefined;
  }
}

function valueOf(params: URLSearchParams | undefined, name: ClickIdParam): string | undefined {
  const value = params?.get(name)?.trim();
  return value && value.length <= MAX_CLICK_ID_LENGTH ? value : undefined;
}

/** Every click id the page URL carries, by its parameter name (names are case-sensitive, as the platforms send them). */
export function clickIdsFromUrl(pageLocation: string | undefined): ClickIds {
  const params = paramsOf(pageLocation);
  const out: Partial<Record<ClickIdParam, string>> = {};
  for (const name of CLICK_ID_PARAMS) {
    const v = valueOf(params, name);
    if (v !== undefined) out[name] = v;
  }
  return out;
}

/** The event's click ids: typed by the gateway; from the page URL for an envelope written before they were. */
export function clickIdsOf(e: Pick<EventEnvelope, 'click_ids' | 'session'>): ClickIds {
  return e.click_ids ?? clickIdsFromUrl(e.session?.page_location);
}
