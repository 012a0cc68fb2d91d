/** A tiny client of the admin API for tests (real HTTP or app.inject through `request`). */
export interface AdminClient {
  createWorkspace(name?: string, plan?: string): Promise<{ id: string; name: string; plan: string }>;
  createKey(workspaceId: string, mode?: 'live' | 'test'): Promise<{ id: string; key: string; mode: string }>;
  call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
}

export function adminClient(baseUrl: string, token: string): AdminClient {
  const call = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON
    }
    return { status: r.status, body: parsed as any };
  };
  return {
    call,
    async createWorkspace(name = 'acme', plan = 'enterprise') {
      const r = await call('POST', '/admin/v1/workspaces', { name, plan });
      if (r.status !== 201) throw new Error(`create workspace: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body;
    },
    async createKey(workspaceId, mode = 'live') {
      const r = await call('POST', `/admin/v1/workspaces/${workspaceId}/api-keys`, { mode });
      if (r.status !== 201) throw new Error(`create key: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body;
    },
  };
}
