-- A cheaper audit row on SQLite (issue 31): every audited call inserts one, on the request's
-- core when the machine has one. The key (time, id) is one index of 24-byte entries where there
-- were two of text (the time's and the text id's), rows arrive in its order, and time ranges
-- and `ORDER BY time, id` walk it instead of sorting; the subject and tool indexes shrink to an
-- integer time per entry. The time is microseconds
-- since the Unix epoch (UTC) as an integer, the id the UUIDv7's 16 bytes. The text forms the
-- table held before convert exactly: fixed-width RFC 3339 UTC text with six fractional digits,
-- and the hyphenated UUID.
CREATE TABLE audit_log_compact (
    time         INTEGER NOT NULL,
    id           BLOB    NOT NULL,
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
    trace_id     TEXT,
    server       TEXT,
    PRIMARY KEY (time, id)
);

INSERT INTO audit_log_compact (time, id, request_id, session_id, issuer, subject, client_id, client_ip, kind, tool, args_sha256, arguments, outcome, detail, duration_ms, result_bytes, replica_id, trace_id, server)
SELECT unixepoch(substr(time, 1, 19)) * 1000000 + CAST(substr(time, 21, 6) AS INTEGER),
       unhex(replace(id, '-', '')),
       request_id, session_id, issuer, subject, client_id, client_ip, kind, tool, args_sha256, arguments,
       outcome, detail, duration_ms, result_bytes, replica_id, trace_id, server
FROM audit_log;

DROP TABLE audit_log;
ALTER TABLE audit_log_compact RENAME TO audit_log;

CREATE INDEX audit_log_subject_time ON audit_log (subject, time);
CREATE INDEX audit_log_tool_time ON audit_log (tool, time);
