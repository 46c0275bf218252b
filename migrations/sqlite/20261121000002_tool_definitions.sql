-- Tool definitions written through the admin API (src/tooldef/db.rs). The definition is the
-- JSON a tools-file entry holds, without `enabled` (the column holds it). Times are
-- fixed-width RFC 3339 UTC text, as in audit_log. revision starts at 1 and grows by one on
-- every change: it is the ETag the admin API's If-Match checks.
CREATE TABLE tool_definitions (
    name       TEXT    PRIMARY KEY NOT NULL,
    definition TEXT    NOT NULL CHECK (json_valid(definition)),
    enabled    INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    revision   INTEGER NOT NULL CHECK (revision >= 1),
    created_at TEXT    NOT NULL,
    updated_at TEXT    NOT NULL,
    updated_by TEXT
);
