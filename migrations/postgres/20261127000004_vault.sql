-- The vault of per-user upstream credentials (src/vault): each user's tokens at an upstream's
-- own authorization server, sealed with XChaCha20-Poly1305 (the row's id, user and upstream
-- and the key id are the associated data, so a sealed value moved to another row does not
-- open); connect links and their browser steps; toolgate's own registrations at those
-- authorization servers, and the authorization server first found for each upstream (a later
-- answer naming another one is refused: an upstream does not get to move its users' refresh
-- tokens and toolgate's client secret elsewhere). Times in milliseconds since the Unix epoch.
CREATE TABLE vault_grants (
    id             TEXT   PRIMARY KEY NOT NULL,
    principal      TEXT   NOT NULL,
    subject        TEXT   NOT NULL,
    upstream       TEXT   NOT NULL,
    issuer         TEXT   NOT NULL,
    key_id         TEXT   NOT NULL,
    sealed         TEXT   NOT NULL,
    scopes         TEXT   NOT NULL,
    expires_ms     BIGINT NOT NULL,
    version        BIGINT NOT NULL,
    lease_until_ms BIGINT NOT NULL,
    created_ms     BIGINT NOT NULL,
    updated_ms     BIGINT NOT NULL,
    used_ms        BIGINT NOT NULL,
    UNIQUE (principal, upstream)
);
CREATE INDEX vault_grants_upstream ON vault_grants (upstream);
CREATE INDEX vault_grants_subject ON vault_grants (subject);
CREATE TABLE vault_connects (
    id           TEXT   PRIMARY KEY NOT NULL,
    principal    TEXT,
    upstream     TEXT   NOT NULL,
    stage        TEXT   NOT NULL,
    browser_hash TEXT,
    state_hash   TEXT,
    pending      TEXT,
    identity     TEXT,
    created_ms   BIGINT NOT NULL,
    expires_ms   BIGINT NOT NULL
);
CREATE INDEX vault_connects_state ON vault_connects (state_hash);
CREATE INDEX vault_connects_expires ON vault_connects (expires_ms);
CREATE TABLE vault_issuers (
    upstream  TEXT   PRIMARY KEY NOT NULL,
    issuer    TEXT   NOT NULL,
    pinned_ms BIGINT NOT NULL
);
CREATE TABLE vault_clients (
    upstream      TEXT   NOT NULL,
    issuer        TEXT   NOT NULL,
    client_id     TEXT   NOT NULL,
    key_id        TEXT,
    sealed_secret TEXT,
    created_ms    BIGINT NOT NULL,
    PRIMARY KEY (upstream, issuer)
);
