-- The graph sink rewrites a returning person's node and edge rows with every sighting (last_seen_at, page data,
-- consent times). The indexes on last_seen_at made each of those updates non-HOT: a new entry in every index of the
-- table, the random node-id and cluster keys among them. Without them, and with room left on each page, an update
-- that keeps the row's cluster is HOT. On Postgres 15, 300,000 nodes: updates 38 -> 18 µs a row, inserts 22 -> 19
-- (docs/decisions.md). The retention sweep (every RETENTION_SWEEP_INTERVAL_MS) now finds expired rows and the oldest
-- entry by reading the tables: ~75 ms per 300,000 rows, per statement.
DROP INDEX IF EXISTS identity_nodes_age;
DROP INDEX IF EXISTS identity_edges_age;
ALTER TABLE identity_nodes SET (fillfactor = 70);
ALTER TABLE identity_edges SET (fillfactor = 70);
