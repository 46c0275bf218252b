-- toolgate's own authorization server (src/authserver/db.rs). One SQL text serves SQLite and
-- Postgres. Times are milliseconds since the Unix epoch. Codes and refresh tokens are stored
-- only as their SHA-256 (hex), never as issued. JSON columns are text.

-- Clients registered dynamically (RFC 7591). `metadata` is the registered metadata as JSON.
CREATE TABLE oauth_clients (
    client_id     TEXT   PRIMARY KEY NOT NULL,
    metadata      TEXT   NOT NULL,
    secret_hash   TEXT,
    created_ms    BIGINT NOT NULL,
    last_used_ms  BIGINT
);
CREATE INDEX oauth_clients_unused ON oauth_clients (last_used_ms, created_ms);

-- An authorization request in progress: the client's validated request, then (after the
-- identity provider's callback) the signed-in user, until the consent answer or expiry.
-- `id` is also the `state` sent to the identity provider; `browser_hash` binds it to the
-- browser that started it (a cookie); `stage` is idp, consent or done.
CREATE TABLE oauth_transactions (
    id            TEXT   PRIMARY KEY NOT NULL,
    browser_hash  TEXT   NOT NULL,
    stage         TEXT   NOT NULL,
    request       TEXT   NOT NULL,
    idp           TEXT   NOT NULL,
    identity      TEXT,
    expires_ms    BIGINT NOT NULL
);
CREATE INDEX oauth_transactions_expiry ON oauth_transactions (expires_ms);

-- Authorization codes: single use; `grant_id` is set when redeemed, so a replay revokes it.
CREATE TABLE oauth_codes (
    code_hash     TEXT   PRIMARY KEY NOT NULL,
    details       TEXT   NOT NULL,
    expires_ms    BIGINT NOT NULL,
    redeemed_ms   BIGINT,
    grant_id      TEXT
);
CREATE INDEX oauth_codes_expiry ON oauth_codes (expires_ms);

-- A grant: one user's sign-in for one client and resource, the lineage of its refresh tokens.
CREATE TABLE oauth_grants (
    id            TEXT   PRIMARY KEY NOT NULL,
    client_id     TEXT   NOT NULL,
    user_key      TEXT   NOT NULL,
    identity      TEXT   NOT NULL,
    scope         TEXT   NOT NULL,
    resource      TEXT   NOT NULL,
    created_ms    BIGINT NOT NULL,
    expires_ms    BIGINT NOT NULL,
    last_used_ms  BIGINT NOT NULL,
    revoked_ms    BIGINT,
    revoked_why   TEXT
);
CREATE INDEX oauth_grants_user ON oauth_grants (user_key, client_id);
CREATE INDEX oauth_grants_revoked ON oauth_grants (revoked_ms);

-- Refresh tokens: rotated on every use (`used_ms` set); a used one presented again revokes
-- its grant.
CREATE TABLE oauth_refresh_tokens (
    token_hash    TEXT   PRIMARY KEY NOT NULL,
    grant_id      TEXT   NOT NULL,
    expires_ms    BIGINT NOT NULL,
    used_ms       BIGINT
);
CREATE INDEX oauth_refresh_tokens_grant ON oauth_refresh_tokens (grant_id);

-- Remembered consent per user and client: the scopes approved and a fingerprint of what the
-- user saw (client name, redirect URIs), so a change asks again.
CREATE TABLE oauth_consents (
    user_key      TEXT   NOT NULL,
    client_id     TEXT   NOT NULL,
    scope         TEXT   NOT NULL,
    fingerprint   TEXT   NOT NULL,
    granted_ms    BIGINT NOT NULL,
    PRIMARY KEY (user_key, client_id)
);
