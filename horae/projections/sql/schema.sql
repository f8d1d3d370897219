-- The current schema of the read models, in one piece. A fresh `horae migrate` must produce
-- exactly this (tests/integration/projections/test_projection_migrate.py); change it with every migration.
-- Runs with search_path = the target schema; names are unqualified.
-- No column takes the wall clock: a rebuild must produce the same rows as the live projection.

-- Which generation of the read models this schema is (changes on create; a swap is detected by
-- a running projector through it).
CREATE TABLE projection_meta (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    generation uuid NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Next offset to consume per (topic, partition); written in the same transaction as the rows.
CREATE TABLE projection_offsets (
    topic text NOT NULL,
    partition integer NOT NULL,
    next_offset bigint NOT NULL,
    PRIMARY KEY (topic, partition)
);

-- Records that could not be projected (undecodable, unexpected type): skipped, kept here.
CREATE TABLE projection_errors (
    topic text NOT NULL,
    partition integer NOT NULL,
    "offset" bigint NOT NULL,
    cause text NOT NULL,
    detail text NOT NULL,
    record_key bytea,
    record_value bytea,
    record_ts timestamptz,
    PRIMARY KEY (topic, partition, "offset")
);

-- Every version of every trigger definition.
CREATE TABLE trigger_versions (
    tenant text NOT NULL,
    trigger_id text NOT NULL,
    version bigint NOT NULL,
    state text NOT NULL,
    recurrence jsonb NOT NULL,
    target jsonb NOT NULL,
    policies jsonb NOT NULL,
    quotas jsonb NOT NULL,
    authored_at timestamptz NOT NULL,
    author text NOT NULL,
    role text NOT NULL,
    description text,
    labels jsonb NOT NULL,
    content_type text NOT NULL,
    payload bytea NOT NULL,
    src_partition integer NOT NULL,
    src_offset bigint NOT NULL,
    PRIMARY KEY (tenant, trigger_id, version)
);

-- The latest version of each trigger (highest version; the first record of a version wins).
CREATE TABLE triggers (
    tenant text NOT NULL,
    trigger_id text NOT NULL,
    version bigint NOT NULL,
    state text NOT NULL,
    recurrence jsonb NOT NULL,
    target jsonb NOT NULL,
    policies jsonb NOT NULL,
    authored_at timestamptz NOT NULL,
    author text NOT NULL,
    description text,
    labels jsonb NOT NULL,
    first_authored_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, trigger_id)
);

-- What the planner applied to each trigger beyond its definition, from its schedule events: the
-- latest schedule.paused / schedule.resumed (by trigger version, then offset on the tenant's
-- events topic, where a trigger's planner events share one partition) and the highest version
-- it completed under; and each tenant's suspension (the latest allowed tenant.suspend /
-- tenant.resume audit entry). trigger_states: the state the read models show.
CREATE TABLE trigger_runs (
    tenant text NOT NULL,
    trigger_id text NOT NULL,
    paused boolean,
    pause_changed_at timestamptz,
    pause_version bigint,
    pause_src_offset bigint,
    completed_version bigint,
    PRIMARY KEY (tenant, trigger_id)
);

CREATE TABLE tenant_suspensions (
    tenant text PRIMARY KEY,
    suspended boolean NOT NULL,
    changed_at timestamptz NOT NULL,
    audit_id text NOT NULL
);

CREATE VIEW trigger_states AS
SELECT t.tenant, t.trigger_id, t.version,
    CASE
        WHEN t.state = 'deleted' THEN 'deleted'
        WHEN s.suspended THEN 'suspended'
        WHEN r.pause_version >= t.version AND r.paused THEN 'paused'
        WHEN r.pause_version >= t.version THEN
            CASE WHEN r.completed_version >= t.version THEN 'completed' ELSE 'live' END
        WHEN t.state = 'paused' THEN 'paused'
        WHEN r.completed_version >= t.version THEN 'completed'
        ELSE t.state
    END AS state,
    -- the state the planner decides under: live or paused (a suspension and a completion leave it)
    CASE
        WHEN t.state = 'deleted' THEN 'deleted'
        WHEN r.pause_version >= t.version THEN CASE WHEN r.paused THEN 'paused' ELSE 'live' END
        ELSE t.state
    END AS run_state
FROM triggers t
LEFT JOIN trigger_runs r USING (tenant, trigger_id)
LEFT JOIN tenant_suspensions s ON s.tenant = t.tenant;

-- One row per fire key. Decision columns come from the first fire record under the key (NULL
-- while only attempts/outcomes were seen); attempt columns are merged commutatively
-- (LEAST/GREATEST) and the outcome columns are the authoritative outcome's (a callback's over the
-- dispatcher's, then the later record: the rank of outcome_source, then the record coordinates),
-- so topic interleaving never changes the result.
CREATE TABLE fires (
    fire_key text PRIMARY KEY,
    key_hash text NOT NULL,
    tenant text NOT NULL,
    trigger_id text NOT NULL,
    origin text,
    scheduled_at timestamptz,
    sequence bigint,
    jitter_ms bigint,
    due_at timestamptz,
    decided_at timestamptz,
    state text,
    trigger_version bigint,
    tzdata_version text,
    target_kind text,
    lane text,
    cause text,
    cause_detail text,
    command_id text,
    src_partition integer,
    src_offset bigint,
    attempt_count bigint NOT NULL DEFAULT 0,
    first_attempt_at timestamptz,
    last_attempt_at timestamptz,
    outcome text,
    outcome_at timestamptz,
    terminal_at timestamptz GENERATED ALWAYS AS (
        CASE WHEN state IS NOT NULL AND state <> 'fired' THEN decided_at ELSE outcome_at END
    ) STORED,
    outcome_source text,
    outcome_src_partition integer,
    outcome_src_offset bigint,
    -- what the on-call reads: the decision, refined by dispatch progress and outcome
    status text GENERATED ALWAYS AS (
        CASE
            WHEN outcome IS NOT NULL THEN outcome
            WHEN state IS NULL THEN 'undecided'
            WHEN state = 'fired' AND attempt_count > 0 THEN 'dispatching'
            ELSE state
        END
    ) STORED,
    -- milliseconds after the due time (scheduled + jitter): an event target's fired decision
    -- (decided_at; its event is committed with it), else the first attempt's start
    lateness_ms double precision GENERATED ALWAYS AS (
        CASE
            WHEN target_kind = 'event' THEN CASE
                WHEN state = 'fired'
                    THEN extract(epoch FROM (decided_at - due_at))::double precision * 1000.0
            END
            ELSE extract(epoch FROM (first_attempt_at - due_at))::double precision * 1000.0
        END
    ) STORED
) WITH (fillfactor = 85);  -- room for HOT updates when attempts and outcomes arrive
CREATE INDEX fires_trigger_scheduled ON fires (tenant, trigger_id, scheduled_at, fire_key);
CREATE INDEX fires_tenant_due ON fires (tenant, due_at);
-- a tenant's fires by time, and by shown state and time (GET /v1/fires)
CREATE INDEX fires_tenant_scheduled ON fires (tenant, scheduled_at, fire_key)
    INCLUDE (trigger_id);
CREATE INDEX fires_tenant_status ON fires (tenant, status, scheduled_at, fire_key)
    INCLUDE (trigger_id);
-- webhook fires decided and not yet attempted (the projector's undispatched gauges)
CREATE INDEX fires_undispatched ON fires (due_at)
    WHERE status = 'fired' AND target_kind = 'webhook';

-- A second fire record under an existing fire key: never applied, counted and kept here.
-- ``identical`` says whether its decision equals the applied one (a re-sent record) or not.
CREATE TABLE fire_duplicates (
    src_topic text NOT NULL,
    src_partition integer NOT NULL,
    src_offset bigint NOT NULL,
    fire_key text NOT NULL,
    identical boolean NOT NULL,
    tenant text NOT NULL,
    trigger_id text NOT NULL,
    origin text NOT NULL,
    scheduled_at timestamptz NOT NULL,
    sequence bigint NOT NULL,
    due_at timestamptz NOT NULL,
    decided_at timestamptz NOT NULL,
    state text NOT NULL,
    trigger_version bigint NOT NULL,
    lane text,
    cause text,
    PRIMARY KEY (src_topic, src_partition, src_offset)
);
CREATE INDEX fire_duplicates_key ON fire_duplicates (fire_key);

-- Dispatch attempts, one per (fire key, attempt number); the first record wins.
CREATE TABLE attempts (
    fire_key text NOT NULL,
    n bigint NOT NULL,
    tenant text NOT NULL,
    trigger_id text NOT NULL,
    lane text NOT NULL,
    started_at timestamptz NOT NULL,
    ended_at timestamptz NOT NULL,
    transport_result text NOT NULL,
    duration_ms bigint NOT NULL,
    http_status integer,
    error text,
    retry_after_s double precision,
    next_attempt_at timestamptz,
    tzdata_version text,
    not_sent text,
    PRIMARY KEY (fire_key, n)
);

-- Every outcome of every fire, one row per record (its coordinates on the outcomes topic):
-- the dispatcher's own (source `dispatcher`) and each callback's (`callback`). `state` is
-- `unknown` for an outcome whose result is unknown.
CREATE TABLE work_outcomes (
    fire_key text NOT NULL,
    tenant text NOT NULL,
    trigger_id text NOT NULL,
    state text NOT NULL,
    attempts bigint NOT NULL,
    decided_at timestamptz NOT NULL,
    first_attempt_at timestamptz,
    last_attempt_at timestamptz,
    http_status integer,
    error text,
    source text NOT NULL,
    tzdata_version text,
    src_partition integer NOT NULL,
    src_offset bigint NOT NULL,
    PRIMARY KEY (fire_key, src_partition, src_offset)
);

-- Public schedule events (what subscribers saw).
CREATE TABLE schedule_events (
    event_id text PRIMARY KEY,
    type text NOT NULL,
    tenant text NOT NULL,
    trigger_id text NOT NULL,
    emitted_at timestamptz NOT NULL,
    trigger_version bigint NOT NULL,
    fire_key text,
    origin text,
    scheduled_at timestamptz,
    due_at timestamptz,
    cause text,
    attempt bigint,
    http_status integer,
    tzdata_version text
);
CREATE INDEX schedule_events_trigger ON schedule_events (tenant, trigger_id, emitted_at);

-- Privileged acts.
CREATE TABLE audit_entries (
    audit_id text PRIMARY KEY,
    tenant text NOT NULL,
    principal text NOT NULL,
    role text NOT NULL,
    action text NOT NULL,
    at timestamptz NOT NULL,
    allowed boolean NOT NULL,
    trigger_id text,
    command_id text,
    detail jsonb NOT NULL
);
CREATE INDEX audit_entries_tenant_at ON audit_entries (tenant, at);

-- Dead letters (the dlq topic): fires the dispatcher gave up on, with the order to send again
-- (``record``) and the link a redrive carries (``link``: <topic>:<partition>:<offset>).
CREATE TABLE dead_letters (
    dlq_id text PRIMARY KEY,
    link text NOT NULL,
    tenant text NOT NULL,
    trigger_id text NOT NULL,
    fire_key text NOT NULL,
    origin text NOT NULL,
    scheduled_at timestamptz NOT NULL,
    lane text NOT NULL,
    attempt integer NOT NULL,
    cause text NOT NULL,
    dead_at timestamptz NOT NULL,
    redrive_of text,
    record bytea NOT NULL
);
CREATE INDEX dead_letters_tenant_dead ON dead_letters (tenant, dead_at, dlq_id);
CREATE INDEX dead_letters_tenant_trigger ON dead_letters (tenant, trigger_id, dead_at, dlq_id);
CREATE INDEX audit_entries_redrive ON audit_entries (tenant, (detail ->> 'dlq'), at)
    WHERE action = 'dlq.redrive';

-- Per-tenant billing counts per UTC day of the scheduled instant: a view, so always consistent.
CREATE VIEW billing_daily AS
SELECT
    tenant,
    (scheduled_at AT TIME ZONE 'UTC')::date AS day,
    count(*) FILTER (WHERE state = 'fired') AS fires,
    count(*) FILTER (WHERE state <> 'fired') AS non_fires,
    coalesce(sum(attempt_count), 0)::bigint AS attempts,
    count(*) FILTER (WHERE outcome = 'succeeded') AS succeeded
FROM fires
WHERE decided_at IS NOT NULL
GROUP BY tenant, (scheduled_at AT TIME ZONE 'UTC')::date;
