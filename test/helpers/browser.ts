/**
 * A minimal browser for tests: follows redirects by hand and keeps the cookies each host set (per host, path `/`),
 * so flows that bind state to the browser (the OAuth connect flow's cookie) run as they do for a person.
 */
export interface Browser {
  /** Opens a URL and follows redirects; the last answer. */
  open(url: string, maxRedirects?: number): Promise<Response & { finalUrl: string }>;
  /** Submits a form (urlencoded POST, a field given several values repeats) and follows the redirect with GETs. */
  submit(url: string, fields: Readonly<Record<string, string | readonly string[]>>): Promise<Response & { finalUrl: string }>;
  /** The cookies held for a host (name → value). */
  cookies(host: string): ReadonlyMap<string, string>;
}

/** The CSRF token of a console page's form (its hidden `_csrf` field), to send back with the form. */
export const csrfOf = (html: string): string => /name="_csrf" value="([^"]+)"/.exec(html)![1]!;

export function newBrowser(): Browser {
  const jar = new Map<string, Map<string, string>>();
  const hostJar = (host: string): Map<string, string> => {
    let j = jar.get(host);
    if (!j) jar.set(host, (j = new Map()));
    return j;
  };
  return {
    cookies: (host) => hostJar(host),
    open: (start, maxRedirects = 10) => go(start, maxRedirects),
    submit(url, fields) {
      const body = new URLSearchParams();
      for (const [k, v] of Object.entries(fields)) for (const one of typeof v === 'string' ? [v] : v) body.append(k, one);
      return go(url, 10, { method: 'POST', body: body.toString(), contentType: 'application/x-www-form-urlencoded' });
    },
  };

  async function go(start: string, maxRedirects: number, first?: { method: string; body: string; contentType: string }): Promise<Response & { finalUrl: string }> {
    {
      let url = start;
      for (let i = 0; ; i++) {
        const u = new URL(url);
        const cookie = [...hostJar(u.host)].map(([k, v]) => `${k}=${v}`).join('; ');
        const post = i === 0 ? first : undefined;
        const res = await fetch(url, {
          redirect: 'manual',
          method: post?.method ?? 'GET',
          headers: { ...(cookie ? { cookie } : {}), ...(post ? { 'content-type': post.contentType } : {}) },
          ...(post ? { body: post.body } : {}),
        });
        for (const set of res.headers.getSetCookie()) {
          const [pair, ...attrs] = set.split(';');
          const eq = pair!.indexOf('=');
          const name = pair!.slice(0, eq).trim();
          const value = pair!.slice(eq + 1).trim();
          const expired = attrs.some((a) => /^\s*max-age=0\s*$/i.test(a)) || value === '';
          if (expired) hostJar(u.host).delete(name);
          else hostJar(u.host).set(name, value);
        }
        const location = res.headers.get('location');
        if (res.status >= 300 && res.status < 400 && location && i < maxRedirects) {
          await res.arrayBuffer();
          url = new URL(location, url).toString();
          continue;
        }
        return Object.assign(res, { finalUrl: url });
      }
    }
  }
}
