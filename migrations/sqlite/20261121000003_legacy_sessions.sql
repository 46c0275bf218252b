-- Legacy-era sessions shared by replicas (src/session/shared.rs). Only Postgres deployments,
-- which may run several replicas, use this table; SQLite keeps sessions in memory. It exists
-- here too so that one migration version means the same schema on both backends.
CREATE TABLE legacy_sessions (
    id               TEXT    PRIMARY KEY NOT NULL,
    owner            TEXT,
    kind             TEXT    NOT NULL,
    version          TEXT    NOT NULL,
    initialized      INTEGER NOT NULL DEFAULT 0,
    caps_sampling    INTEGER NOT NULL DEFAULT 0,
    caps_elicit_form INTEGER NOT NULL DEFAULT 0,
    caps_elicit_url  INTEGER NOT NULL DEFAULT 0,
    caps_roots       INTEGER NOT NULL DEFAULT 0,
    client_name      TEXT    NOT NULL DEFAULT '',
    client_version   TEXT    NOT NULL DEFAULT '',
    log_level        INTEGER NOT NULL,
    created_at       TEXT    NOT NULL,
    last_seen        TEXT    NOT NULL
);

CREATE INDEX legacy_sessions_last_seen ON legacy_sessions (last_seen);
