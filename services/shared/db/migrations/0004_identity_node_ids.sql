-- Identity nodes keyed by one node_id (SHA-256 of workspace, mode, kind and value) and found by cluster through an
-- index led by cluster_id (cluster ids are unique across workspaces and modes). With 0003's keys every lookup had
-- two candidate indexes, and the embedded store, which has no autovacuum to gather statistics, picked the one that
-- scans the whole workspace. Converted in place: the graph already built is kept.
ALTER TABLE identity_nodes ADD COLUMN node_id text;
UPDATE identity_nodes
   SET node_id = encode(sha256(convert_to(workspace_id || E'\n' || key_mode || E'\n' || kind || E'\n' || value, 'UTF8')), 'hex');
ALTER TABLE identity_nodes ALTER COLUMN node_id SET NOT NULL;
ALTER TABLE identity_nodes DROP CONSTRAINT identity_nodes_pkey;
ALTER TABLE identity_nodes ADD PRIMARY KEY (node_id);
DROP INDEX identity_nodes_cluster;
CREATE INDEX identity_nodes_cluster ON identity_nodes (cluster_id, kind);
