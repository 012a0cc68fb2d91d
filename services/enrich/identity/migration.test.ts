/** 0004 converts a graph built under 0003's keys in place: the same nodes, found by the repository as before. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { migrate, migrationsDir } from '../../shared/db/migrate.js';
import { openPglite } from '../../shared/db/pglite.js';
import { loadGraph } from './graph-repo.js';

it('0004 keeps the nodes 0003 stored and the repository finds them by their new keys', async () => {
  const db = await openPglite(undefined);
  try {
    await db.query('CREATE TABLE schema_migrations (id text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
    for (const file of ['0001_core.sql', '0002_setups_and_connections.sql', '0003_identity_graph.sql']) {
      const text = readFileSync(join(migrationsDir(), file), 'utf8');
      for (const s of text.split(/;\s*$/m).map((x) => x.replace(/^\s*--.*$/gm, '').trim()).filter(Boolean)) await db.query(s);
      await db.query('INSERT INTO schema_migrations (id) VALUES ($1)', [file]);
    }
    await db.query(`INSERT INTO identity_nodes (workspace_id, key_mode, kind, value, cluster_id, first_seen_at, last_seen_at)
      VALUES ('ws', 'live', 'user_id', 'u-1', 'c_old', now(), now()), ('ws', 'live', 'client_id', 'c-1', 'c_old', now(), now())`);
    expect(await migrate(db)).toContain('0004_identity_node_ids.sql');

    const scope = { workspaceId: 'ws', keyMode: 'live' } as const;
    const node = { kind: 'client_id', value: 'c-1' } as const;
    const graph = await loadGraph(db, [{ scope, node }], { maxClusterIdentifiers: 100 });
    const linked = graph.link(scope, [node], Date.now(), null);
    expect(linked.resolved).toBe('c_old');
    expect(graph.identifiers('c_old', ['user_id'], 5)).toEqual([{ kind: 'user_id', value: 'u-1' }]);
  } finally {
    await db.close();
  }
});
