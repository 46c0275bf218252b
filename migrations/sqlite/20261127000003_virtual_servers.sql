-- Virtual servers (src/virtual_servers): which one a request was sent to is kept with its
-- audit record and with a legacy session (a session belongs to the server it was created
-- on); servers defined through the admin API are stored like upstream definitions: the JSON
-- of one `[servers.<name>]` table, a revision that grows by one on every change (the admin
-- API's ETag), times in milliseconds since the Unix epoch.
ALTER TABLE audit_log ADD COLUMN server TEXT;
ALTER TABLE legacy_sessions ADD COLUMN server TEXT;
CREATE TABLE server_definitions (
    name       TEXT   PRIMARY KEY NOT NULL,
    definition TEXT   NOT NULL,
    revision   BIGINT NOT NULL CHECK (revision >= 1),
    updated_ms BIGINT NOT NULL,
    updated_by TEXT
);
