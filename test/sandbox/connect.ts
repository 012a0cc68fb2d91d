/**
 * Opens the service's connect link (`authorize_url`) as a browser does: the start link binds the flow to this
 * "browser" with a cookie and redirects to the sandbox's authorize page, which approves and sends the browser back to
 * the service's callback, cookie included. Returns the callback page. For the demo and the benchmarks.
 */
export async function connectLikeABrowser(authorizeUrl: string): Promise<{ status: number; html: string }> {
  const opened = await fetch(authorizeUrl, { redirect: 'manual' });
  const platformPage = opened.headers.get('location');
  if (opened.status !== 302 || !platformPage) throw new Error(`the connect link answered ${opened.status}`);
  const cookie = opened.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
  const consent = await fetch(platformPage, { redirect: 'manual' });
  const callback = consent.headers.get('location');
  if (consent.status !== 302 || !callback) throw new Error(`the authorize page answered ${consent.status}`);
  const page = await fetch(callback, { headers: { cookie } });
  return { status: page.status, html: await page.text() };
}
