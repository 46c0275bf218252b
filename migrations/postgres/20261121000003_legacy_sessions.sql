-- Legacy-era (2025-11-25 and older) sessions shared by every replica (src/session/shared.rs),
-- so a session created through one replica works through any other without load-balancer
-- affinity. Streams and in-flight work stay in the memory of the replica serving them; this
-- row is what any replica needs to accept the session's requests.
CREATE TABLE legacy_sessions (
    id             TEXT        PRIMARY KEY,
    -- The principal (issuer + subject) that created it; only it may use it. NULL without auth.
    owner          TEXT,
    kind           TEXT        NOT NULL,
    version        TEXT        NOT NULL,
    initialized    BOOLEAN     NOT NULL DEFAULT FALSE,
    caps_sampling  BOOLEAN     NOT NULL DEFAULT FALSE,
    caps_elicit_form BOOLEAN   NOT NULL DEFAULT FALSE,
    caps_elicit_url  BOOLEAN   NOT NULL DEFAULT FALSE,
    caps_roots     BOOLEAN     NOT NULL DEFAULT FALSE,
    client_name    TEXT        NOT NULL DEFAULT '',
    client_version TEXT        NOT NULL DEFAULT '',
    log_level      SMALLINT    NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Refreshed at most once a minute per replica; idle sessions are swept by any replica.
    last_seen      TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX legacy_sessions_last_seen ON legacy_sessions (last_seen);
