/** Workspaces and API keys in the database. Keys are stored as SHA-256 hashes only. */
import { audit } from '../domain/audit-log.js';
import { generateApiKey } from '../domain/api-key-format.js';
import type { Sql } from '../shared/db/db.js';
import type { KeyMode } from '../domain/envelope.js';
import { newId } from '../shared/ids.js';

export interface Workspace {
  readonly id: string;
  readonly name: string;
  readonly plan: string;
}

export interface ApiKeyRecord {
  readonly id: string;
  readonly workspaceId: string;
  readonly name: string;
  readonly mode: KeyMode;
  readonly displayStart: string;
  readonly createdAt: string;
  /** Precise to about a minute (gateway/auth/usage.ts); null when never used. */
  readonly lastUsedAt: string | null;
  readonly revokedAt: string | null;
  readonly revoked: boolean;
}

export interface CreatedApiKey {
  readonly id: string;
  readonly key: string;
  readonly mode: KeyMode;
  readonly name: string;
  readonly created_at: string;
}

const iso = (v: unknown): string | null => (v === null || v === undefined ? null : new Date(v as string).toISOString());

export class WorkspaceRepo {
  constructor(private readonly sql: Sql) {}

  async create(name: string, plan: string, actor = 'admin'): Promise<Workspace> {
    const ws = { id: newId('ws'), name, plan };
    await this.sql.query('INSERT INTO workspaces (id, name, plan) VALUES ($1, $2, $3)', [ws.id, name, plan]);
    await audit(this.sql, ws.id, 'workspace.created', { name, plan }, actor);
    return ws;
  }

  /** Every workspace, oldest first, after the `after` id of a previous page. */
  async list(limit: number, after?: string): Promise<Array<Workspace & { created_at: string }>> {
    const r = await this.sql.query<Workspace & { created_at: unknown }>(
      `SELECT id, name, plan, created_at FROM workspaces
       WHERE $1::text IS NULL OR (created_at, id) > (SELECT created_at, id FROM workspaces WHERE id = $1)
       ORDER BY created_at, id LIMIT $2`,
      [after ?? null, limit],
    );
    return r.rows.map((w) => ({ id: w.id, name: w.name, plan: w.plan, created_at: iso(w.created_at)! }));
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
    if (r.rows[0]) await audit(this.sql, id, 'workspace.updated', patch, 'admin');
    return r.rows[0];
  }

  /** Creates a key; the whole key is in the result and nowhere else, ever. */
  async createApiKey(workspaceId: string, mode: KeyMode, name = '', actor = 'admin'): Promise<CreatedApiKey> {
    const generated = generateApiKey(mode);
    const id = newId('key');
    const r = await this.sql.query<{ created_at: unknown }>(
      'INSERT INTO api_keys (id, workspace_id, key_hash, display_start, mode, name) VALUES ($1, $2, $3, $4, $5, $6) RETURNING created_at',
      [id, workspaceId, generated.hash, generated.displayStart, mode, name],
    );
    await audit(this.sql, workspaceId, 'api_key.created', { key_id: id, mode, name }, actor);
    return { id, key: generated.key, mode, name, created_at: iso(r.rows[0]!.created_at)! };
  }

  async listApiKeys(workspaceId: string): Promise<ApiKeyRecord[]> {
    const r = await this.sql.query<{
      id: string;
      workspace_id: string;
      name: string;
      mode: KeyMode;
      display_start: string;
      created_at: unknown;
      last_used_at: unknown;
      revoked_at: unknown;
    }>(
      `SELECT id, workspace_id, name, mode, display_start, created_at, last_used_at, revoked_at
       FROM api_keys WHERE workspace_id = $1 ORDER BY created_at, id`,
      [workspaceId],
    );
    return r.rows.map((k) => ({
      id: k.id,
      workspaceId: k.workspace_id,
      name: k.name,
      mode: k.mode,
      displayStart: k.display_start,
      createdAt: iso(k.created_at)!,
      lastUsedAt: iso(k.last_used_at),
      revokedAt: iso(k.revoked_at),
      revoked: k.revoked_at !== null,
    }));
  }

  /** Returns false when the key does not exist in the workspace. Revoking twice is fine. */
  async revokeApiKey(workspaceId: string, keyId: string, actor = 'admin'): Promise<boolean> {
    const r = await this.sql.query<{ id: string }>(
      'UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1 AND workspace_id = $2 RETURNING id',
      [keyId, workspaceId],
    );
    if (r.rows.length === 0) return false;
    await audit(this.sql, workspaceId, 'api_key.revoked', { key_id: keyId }, actor);
    return true;
  }
}
