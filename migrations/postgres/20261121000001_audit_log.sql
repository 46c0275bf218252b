-- The audit log: one row per tools/call and per security event.
-- arguments is TEXT (JSON), not JSONB: JSONB refuses \u0000, and a row the database refuses
-- would block the writer's queue forever.
CREATE TABLE audit_log (
    id           UUID        PRIMARY KEY,
    time         TIMESTAMPTZ NOT NULL,
    request_id   TEXT,
    session_id   TEXT,
    issuer       TEXT,
    subject      TEXT,
    client_id    TEXT,
    client_ip    TEXT,
    kind         TEXT        NOT NULL,
    tool         TEXT,
    args_sha256  TEXT,
    arguments    TEXT,
    outcome      TEXT        NOT NULL,
    detail       TEXT,
    duration_ms  BIGINT,
    result_bytes BIGINT,
    replica_id   TEXT        NOT NULL,
    trace_id     TEXT
);

CREATE INDEX audit_log_time ON audit_log (time);
CREATE INDEX audit_log_subject_time ON audit_log (subject, time);
CREATE INDEX audit_log_tool_time ON audit_log (tool, time);
