-- Tasks (src/tasks/): long-running tool calls kept until their TTL, readable through any
-- replica. Times are milliseconds since the Unix epoch; JSON is stored as text. The same
-- columns and types exist on Postgres, so the same SQL serves both.
CREATE TABLE tasks (
    id             TEXT    PRIMARY KEY NOT NULL,
    -- The principal (issuer and subject) that created it; NULL without authentication.
    owner          TEXT,
    -- Whom the running-task cap counts against: the principal, or the client address without
    -- authentication (digested, never in clear).
    client         TEXT    NOT NULL DEFAULT '',
    era            TEXT    NOT NULL,
    tool           TEXT    NOT NULL,
    status         TEXT    NOT NULL,
    status_message TEXT,
    created_ms     BIGINT  NOT NULL,
    updated_ms     BIGINT  NOT NULL,
    ttl_ms         BIGINT,
    expires_ms     BIGINT,
    poll_ms        BIGINT  NOT NULL,
    -- Once terminal: {"result": ...} or {"error": {...}}, exactly what the call answered.
    outcome        TEXT,
    -- The replica running it and until when its claim holds without renewal.
    lease_owner    TEXT,
    lease_until_ms BIGINT
);

CREATE INDEX tasks_owner_created ON tasks (owner, created_ms, id);
CREATE INDEX tasks_expires ON tasks (expires_ms);
CREATE INDEX tasks_lease ON tasks (status, lease_until_ms);
CREATE INDEX tasks_client ON tasks (client, status);
