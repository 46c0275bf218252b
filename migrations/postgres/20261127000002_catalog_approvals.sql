-- The approved catalog (src/approval/db.rs): every version of every tool, resource, resource
-- template and prompt an upstream MCP server listed while its `approval` was `pin` or
-- `approve`, one row per (source, kind, name, fingerprint). `entry` is the listed JSON as
-- text (at most 64 KiB), so an approved version keeps serving after the upstream changed it.
-- `state`: approved (served), pending (held for an operator), rejected, superseded (approved
-- once, replaced by a later approval). Times are milliseconds since the Unix epoch. One SQL
-- text serves SQLite and Postgres.
CREATE TABLE catalog_entries (
    id            TEXT   PRIMARY KEY NOT NULL,
    source        TEXT   NOT NULL,
    kind          TEXT   NOT NULL CHECK (kind IN ('tool', 'resource', 'template', 'prompt')),
    name          TEXT   NOT NULL,
    fingerprint   TEXT   NOT NULL,
    entry         TEXT   NOT NULL,
    state         TEXT   NOT NULL CHECK (state IN ('approved', 'pending', 'rejected', 'superseded')),
    first_seen_ms BIGINT NOT NULL,
    decided_by    TEXT,
    decided_ms    BIGINT,
    UNIQUE (source, kind, name, fingerprint)
);
-- At most one approved version of an entry: a second approval must supersede the first.
CREATE UNIQUE INDEX catalog_entries_one_approved ON catalog_entries (source, kind, name) WHERE state = 'approved';
CREATE INDEX catalog_entries_state ON catalog_entries (state, first_seen_ms);

-- A source whose first listing was approved automatically (`pin`): from then on every new or
-- changed entry is held. Inserted with ON CONFLICT DO NOTHING, so replicas racing on their
-- first start agree.
CREATE TABLE catalog_baselines (
    source TEXT   PRIMARY KEY NOT NULL,
    at_ms  BIGINT NOT NULL
);
