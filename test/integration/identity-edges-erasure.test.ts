/**
 * Erasures delete a person's graph links through the indexes, not by reading all of identity_edges: both the graph
 * sink's (an erasure record's changes) and the erasure job's (erase.ts). Real Postgres with 30,000 links of other
 * people (analysed, so the planner chooses as it would in production); each delete is run under EXPLAIN (ANALYZE,
 * BUFFERS) first (rolled back), and exactly the person's links must be gone, in both key modes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deleteEdges } from '../../services/enrich/identity/erase.js';
import { applyChanges } from '../../services/enrich/identity/graph-sink.js';
import type { GraphChanges } from '../../services/enrich/identity/graph-state.js';
import type { Db, Sql } from '../../services/shared/db/db.js';
import { openDatabase } from '../../services/shared/db/open.js';
import { freshDatabase, infraEnv } from '../helpers/infra.js';

let database: Awaited<ReturnType<typeof freshDatabase>>;
let db: Db;
const WS = 'ws_erase_links';

beforeAll(async () => {
  database = await freshDatabase(infraEnv().DATABASE_URL);
  db = await openDatabase({ databaseUrl: database.url });
  // Other people's links, in this workspace and others, in both modes.
  await db.query(
    `INSERT INTO identity_edges (workspace_id, key_mode, a_kind, a_value, b_kind, b_value, first_seen_at, last_seen_at)
     SELECT CASE WHEN i % 3 = 0 THEN $1 ELSE 'ws_other_' || (i % 40) END, CASE WHEN i % 5 = 0 THEN 'test' ELSE 'live' END,
            'client_id', md5('a' || i), 'email_sha256', md5('b' || i), now(), now()
     FROM generate_series(1, 30000) i`,
    [WS],
  );
  await db.query('ANALYZE identity_edges');
});
afterAll(async () => {
  await db?.close();
  await database?.drop();
});

/** The person: a client id and an email linked in both modes, and a link from the email to an organisation. */
async function seedPerson(): Promise<void> {
  await db.query(
    `INSERT INTO identity_nodes (node_id, workspace_id, key_mode, kind, value, cluster_id, first_seen_at, last_seen_at) VALUES
       ('n_c', $1, 'live', 'client_id', 'cid-p', 'c_p', now(), now()),
       ('n_e', $1, 'live', 'email_sha256', 'mail-p', 'c_p', now(), now())
     ON CONFLICT DO NOTHING`,
    [WS],
  );
  await db.query(
    `INSERT INTO identity_edges (workspace_id, key_mode, a_kind, a_value, b_kind, b_value, first_seen_at, last_seen_at) VALUES
       ($1, 'live', 'client_id', 'cid-p', 'email_sha256', 'mail-p', now(), now()),
       ($1, 'test', 'client_id', 'cid-p', 'email_sha256', 'mail-p', now(), now()),
       ($1, 'live', 'email_sha256', 'mail-p', 'organization', 'org-1', now(), now()),
       ($1, 'live', 'client_id', 'cid-other', 'organization', 'org-1', now(), now())
     ON CONFLICT DO NOTHING`,
    [WS],
  );
}

interface PlanNode {
  readonly 'Node Type': string;
  readonly 'Relation Name'?: string;
  readonly 'Shared Hit Blocks': number;
  readonly 'Shared Read Blocks': number;
  readonly Plans?: readonly PlanNode[];
}
const nodesOf = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodesOf)];

/**
 * Runs `fn` in a transaction with each of its statements that deletes from identity_edges run first under EXPLAIN
 * (ANALYZE, BUFFERS) and rolled back; answers whether any read the table whole, and the most pages one touched. A
 * lookup by identifier touches a few pages of each index; a scan of a workspace's range of an index, hundreds.
 */
async function deletesOf(fn: (sql: Sql) => Promise<void>): Promise<{ seqScans: number; maxPages: number }> {
  return db.transaction(async (sql) => {
    const plans: PlanNode[] = [];
    const spy: Sql = {
      ...sql,
      query: (async (text: string, params?: unknown[]) => {
        if (/DELETE FROM identity_edges/.test(text)) {
          await sql.query('SAVEPOINT explained');
          const r = await sql.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${text}`, params);
          plans.push(r.rows[0]!['QUERY PLAN'][0].Plan);
          await sql.query('ROLLBACK TO SAVEPOINT explained');
        }
        return sql.query(text, params);
      }) as Sql['query'],
    };
    await fn(spy);
    expect(plans.length).toBeGreaterThan(0);
    return {
      seqScans: plans.flatMap(nodesOf).filter((n) => n['Node Type'] === 'Seq Scan' && n['Relation Name'] === 'identity_edges').length,
      maxPages: Math.max(...plans.map((p) => p['Shared Hit Blocks'] + p['Shared Read Blocks'])),
    };
  });
}

const personLinks = async () =>
  (
    await db.query<{ key_mode: string; a_value: string; b_value: string }>(
      `SELECT key_mode, a_value, b_value FROM identity_edges WHERE workspace_id = $1 AND (a_value IN ('cid-p', 'mail-p', 'cid-other') OR b_value IN ('cid-p', 'mail-p')) ORDER BY 1, 2, 3`,
      [WS],
    )
  ).rows;

describe('erasing a person from identity_edges', () => {
  it("the graph sink's erasure deletes the person's links in both modes through the indexes", async () => {
    await seedPerson();
    const changes: GraphChanges = { workspace_id: WS, key_mode: 'live', merges: [], nodes: [], edges: [], withdrawals: [], erased_clusters: ['c_p'], erased_node_ids: [], sightings: [] };
    const deletes = await deletesOf((sql) => applyChanges(sql, [changes]));
    expect(deletes).toEqual({ seqScans: 0, maxPages: expect.any(Number) });
    expect(deletes.maxPages).toBeLessThan(60);
    expect(await personLinks()).toEqual([{ key_mode: 'live', a_value: 'cid-other', b_value: 'org-1' }]);
    expect((await db.query(`SELECT count(*)::int AS n FROM identity_nodes WHERE cluster_id = 'c_p'`)).rows[0]).toEqual({ n: 0 });
    expect((await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM identity_edges`)).rows[0]!.n).toBe(30_001);
  });

  it("the erasure job's deleteEdges does too", async () => {
    await seedPerson();
    let removed = 0;
    const deletes = await deletesOf(async (sql) => {
      removed = await deleteEdges(sql, WS, [
        { kind: 'client_id', value: 'cid-p' },
        { kind: 'email_sha256', value: 'mail-p' },
      ]);
    });
    expect(deletes).toEqual({ seqScans: 0, maxPages: expect.any(Number) });
    expect(deletes.maxPages).toBeLessThan(60);
    expect(removed).toBe(3);
    expect(await personLinks()).toEqual([{ key_mode: 'live', a_value: 'cid-other', b_value: 'org-1' }]);
  });
});
