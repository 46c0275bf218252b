-- The audit log: one row per tools/call and per security event.
-- SQLite keeps time as fixed-width RFC 3339 UTC text (YYYY-MM-DDTHH:MM:SS.ffffffZ), which
-- sorts and compares correctly as text; the id is the UUIDv7 in its hyphenated form.
CREATE TABLE audit_log (
    id           TEXT    PRIMARY KEY NOT NULL,
    time         TEXT    NOT NULL,
    request_id   TEXT,
    session_id   TEXT,
    issuer       TEXT,
    subject      TEXT,
    client_id    TEXT,
    client_ip    TEXT,
    kind         TEXT    NOT NULL,
    tool         TEXT,
    args_sha256  TEXT,
    arguments    TEXT,
    outcome      TEXT    NOT NULL,
    detail       TEXT,
    duration_ms  INTEGER,
    result_bytes INTEGER,
    replica_id   TEXT    NOT NULL,
    trace_id     TEXT
);

CREATE INDEX audit_log_time ON audit_log (time);
CREATE INDEX audit_log_subject_time ON audit_log (subject, time);
CREATE INDEX audit_log_tool_time ON audit_log (tool, time);
