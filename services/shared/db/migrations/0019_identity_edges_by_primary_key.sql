-- Every graph link the sink writes went into three indexes: the primary key (workspace, key mode, a's kind and value,
-- b's kind and value), identity_edges_a (workspace, a's kind and value) and identity_edges_b. Only the erasures read
-- by a's end, and they now name the key mode too (enrich/identity/erase.ts deleteEdges), so the primary key finds
-- those edges and identity_edges_a is not needed. On Postgres 15 (60,000 links, batches of 3,000) an edge upsert
-- took ~14 µs a row of the database's time without it, against ~19 with it (docs/decisions.md).
DROP INDEX IF EXISTS identity_edges_a;
