/** The platform's click id (`ttclid`), read from the page URL's query string as the operator contract says. */
const MAX_CLICK_ID_LENGTH = 512;

export function clickIdFromUrl(pageLocation: string | undefined): string | undefined {
  if (!pageLocation) return undefined;
  let url: URL;
  try {
    url = new URL(pageLocation);
  } catch {
    return undefined;
  }
  const value = url.searchParams.get('ttclid')?.trim();
  return value && value.length <= MAX_CLICK_ID_LENGTH ? value : undefined;
}
