-- What every API process shares (horae/api/state.py): the versions the API wrote
-- (read-your-writes, claims that keep two processes from producing one version) and target
-- ownership verification. Its own schema, not the read models': a rebuild swaps those.
-- Runs with search_path = the API's state schema.

-- Written on every create and amend, read on every GET: unlogged (no WAL); a PostgreSQL crash
-- empties it, which only shortens read-your-writes to the projector's lag.
CREATE UNLOGGED TABLE recent_writes (
    tenant text NOT NULL,
    trigger_id text NOT NULL,
    version bigint NOT NULL,
    confirmed boolean NOT NULL,
    until timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    definition bytea NOT NULL,
    PRIMARY KEY (tenant, trigger_id)
);
CREATE INDEX recent_writes_until ON recent_writes (until);

CREATE TABLE target_challenges (
    tenant text NOT NULL,
    host text NOT NULL,
    token text NOT NULL,
    well_known_url text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, host)
);

CREATE TABLE verified_hosts (
    tenant text NOT NULL,
    host text NOT NULL,
    verified_until timestamptz NOT NULL,
    PRIMARY KEY (tenant, host)
);
