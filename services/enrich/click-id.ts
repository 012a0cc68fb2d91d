/**
 * Click ids read from the page URL's query string: TikTok's `ttclid` (the operator contract), and the other
 * destinations' own: Meta's `fbclid` (sent to Meta as `fbc`), Google's `gclid`, `gbraid` and `wbraid`. Each goes
 * only to its own platform (forwarder/destinations).
 */
const MAX_CLICK_ID_LENGTH = 512;

export const CLICK_ID_PARAMS = ['ttclid', 'fbclid', 'gclid', 'gbraid', 'wbraid'] as const;
export type ClickIdParam = (typeof CLICK_ID_PARAMS)[number];

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

export function clickIdFromUrl(pageLocation: string | undefined): string | undefined {
  return valueOf(paramsOf(pageLocation), 'ttclid');
}

/** Every click id the page URL carries, by its parameter name (names are case-sensitive, as the platforms send them). */
export function clickIdsFromUrl(pageLocation: string | undefined): Partial<Record<ClickIdParam, string>> {
  const params = paramsOf(pageLocation);
  const out: Partial<Record<ClickIdParam, string>> = {};
  for (const name of CLICK_ID_PARAMS) {
    const v = valueOf(params, name);
    if (v !== undefined) out[name] = v;
  }
  return out;
}
