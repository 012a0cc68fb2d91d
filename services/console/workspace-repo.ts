/** Workspaces and API keys in the database. Keys are stored as SHA-256 hashes only. */
import { generateApiKey } from '../shared/api-key-format.js';
import type { Sql } from '../shared/db/db.js';
import type { KeyMode } from '../shared/envelope.js';
import { newId } from '../shared/ids.js';

export interface Workspace {
  readonly id: string;
  readonly name: string;
  readonly plan: string;
}

export interface ApiKeyRecord {
  readonly id: string;
  readonly workspaceId: string;
  readonly mode: KeyMode;
  readonly displayStart: string;
  readonly revoked: boolean;
}

export class WorkspaceRepo {
  constructor(private readonly sql: Sql) {}

  async create(name: string, plan: string): Promise<Workspace> {
    const ws = { id: newId('ws'), name, plan };
    await this.sql.query('INSERT INTO workspaces (id, name, plan) VALUES ($1, $2, $3)', [ws.id, name, plan]);
    await this.audit(ws.id, 'workspace.created', { name, plan });
    return ws;
  }

  async get(id: string): Promise<Workspace | undefined> {
    const r = await this.sql.query<Workspace>('SELECT id, name, plan FROM workspaces WHERE id = $1', [id]);
    return r.rows[0];
  }

  async update(id: string, patch: { plan?: string; name?: string }): Promise<Workspace | undefined> {
    const r = await this.sql.query<Workspace>(
      `UPDATE workspaces SET plan = COALESCE($2, plan), name = COALESCE($3, name), updated_at = now()
       WHERE id = $1 RETURNING id, name, plan`,
      [id, patch.plan ?? null, patch.name ?? null],
    );
    if (r.rows[0]) await this.audit(id, 'workspace.updated', patch);
    return r.rows[0];
  }

  /** Creates a key; the whole key is in the result and nowhere else, ever. */
  async createApiKey(workspaceId: string, mode: KeyMode): Promise<{ id: string; key: string; mode: KeyMode }> {
    const generated = generateApiKey(mode);
    const id = newId('key');
    await this.sql.query(
      'INSERT INTO api_keys (id, workspace_id, key_hash, display_start, mode) VALUES ($1, $2, $3, $4, $5)',
      [id, workspaceId, generated.hash, generated.displayStart, mode],
    );
    await this.audit(workspaceId, 'api_key.created', { key_id: id, mode });
    return { id, key: generated.key, mode };
  }

  async listApiKeys(workspaceId: string): Promise<ApiKeyRecord[]> {
    const r = await this.sql.query<{ id: string; workspace_id: string; mode: KeyMode; display_start: string; revoked_at: unknown }>(
      'SELECT id, workspace_id, mode, display_start, revoked_at FROM api_keys WHERE workspace_id = $1 ORDER BY created_at',
      [workspaceId],
    );
    return r.rows.map((k) => ({
      id: k.id,
      workspaceId: k.workspace_id,
      mode: k.mode,
      displayStart: k.display_start,
      revoked: k.revoked_at !== null,
    }));
  }

  /** Returns false when the key does not exist in the workspace. Revoking twice is fine. */
  async revokeApiKey(workspaceId: string, keyId: string): Promise<boolean> {
    const r = await this.sql.query<{ id: string }>(
      'UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1 AND workspace_id = $2 RETURNING id',
      [keyId, workspaceId],
    );
    if (r.rows.length === 0) return false;
    await this.audit(workspaceId, 'api_key.revoked', { key_id: keyId });
    return true;
  }

  private async audit(workspaceId: string, action: string, detail: Record<string, unknown>): Promise<void> {
    await this.sql.query('INSERT INTO audit_log (workspace_id, actor, action, detail) VALUES ($1, $2, $3, $4::jsonb)', [
      workspaceId,
      'admin',
      action,
      JSON.stringify(detail),
    ]);
  }
}
