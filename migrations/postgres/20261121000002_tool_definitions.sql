-- Tool definitions written through the admin API (src/tooldef/db.rs). The definition is the
-- JSON a tools-file entry holds, without `enabled` (the column holds it); JSONB so operators
-- can query it. revision starts at 1 and grows by one on every change: it is the ETag the
-- admin API's If-Match checks.
CREATE TABLE tool_definitions (
    name       TEXT        PRIMARY KEY,
    definition JSONB       NOT NULL,
    enabled    BOOLEAN     NOT NULL,
    revision   BIGINT      NOT NULL CHECK (revision >= 1),
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    updated_by TEXT
);
