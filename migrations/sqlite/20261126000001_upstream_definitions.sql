-- Upstream MCP servers defined through the admin API (src/upstream/db.rs). The definition is
-- the JSON of one `[upstreams.<name>]` table, kept as text (one SQL text serves both
-- dialects). revision starts at 1 and grows by one on every change: the admin API's ETag.
-- Times are milliseconds since the Unix epoch.
CREATE TABLE upstream_definitions (
    name       TEXT   PRIMARY KEY NOT NULL,
    definition TEXT   NOT NULL,
    revision   BIGINT NOT NULL CHECK (revision >= 1),
    updated_ms BIGINT NOT NULL,
    updated_by TEXT
);
