-- Per-connection staging tables: each batch is COPYed here, merged into the read models by the
-- merge/*.sql statements and emptied at COMMIT. Column order and types = STAGE_COLUMNS and
-- STAGE_TYPES in rows.py (binary COPY); JSON travels as text and is cast in the merges.
CREATE TEMP TABLE IF NOT EXISTS stage_definitions (
    tenant text, trigger_id text, version bigint, state text, recurrence text, target text,
    policies text, quotas text, authored_at timestamptz, author text, role text,
    description text, labels text, content_type text, payload bytea,
    src_partition integer, src_offset bigint
) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS stage_fires (
    fire_key text, key_hash text, tenant text, trigger_id text, origin text,
    scheduled_at timestamptz, sequence bigint, jitter_ms bigint, due_at timestamptz,
    decided_at timestamptz, state text, trigger_version bigint, tzdata_version text,
    target_kind text, lane text, cause text, cause_detail text, command_id text,
    src_topic text, src_partition integer, src_offset bigint
) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS stage_attempts (
    fire_key text, key_hash text, tenant text, trigger_id text, n bigint, lane text,
    started_at timestamptz, ended_at timestamptz, transport_result text, duration_ms bigint,
    http_status integer, error text, retry_after_s double precision, next_attempt_at timestamptz,
    tzdata_version text, not_sent text, src_partition integer, src_offset bigint
) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS stage_outcomes (
    fire_key text, key_hash text, tenant text, trigger_id text, state text, attempts bigint,
    decided_at timestamptz, first_attempt_at timestamptz, last_attempt_at timestamptz,
    http_status integer, error text, source text, tzdata_version text,
    src_partition integer, src_offset bigint
) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS stage_schedule_events (
    event_id text, type text, tenant text, trigger_id text, emitted_at timestamptz,
    trigger_version bigint, fire_key text, origin text, scheduled_at timestamptz,
    due_at timestamptz, cause text, attempt bigint, http_status integer, tzdata_version text,
    src_partition integer, src_offset bigint
) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS stage_audit (
    audit_id text, tenant text, principal text, role text, action text, at timestamptz,
    allowed boolean, trigger_id text, command_id text, detail text,
    src_partition integer, src_offset bigint
) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS stage_errors (
    topic text, partition integer, "offset" bigint, cause text, detail text,
    record_key bytea, record_value bytea, record_ts timestamptz
) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS stage_dead_letters (
    dlq_id text, link text, tenant text, trigger_id text, fire_key text, origin text,
    scheduled_at timestamptz, lane text, attempt integer, cause text, dead_at timestamptz,
    redrive_of text, record bytea, src_partition integer, src_offset bigint
) ON COMMIT DELETE ROWS;
