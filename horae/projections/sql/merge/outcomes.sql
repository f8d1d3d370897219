-- Outcomes: every record is kept (once per record coordinates: a replay is a no-op). Of the
-- records stored now, the authoritative one per fire (a callback's over the dispatcher's, then
-- the later record) becomes the fire's outcome if it outranks the one the fire shows; attempt
-- progress merges with LEAST/GREATEST either way. So the result never depends on how topics
-- interleave, and the fire row is touched once per fire and batch.
WITH stored AS (
    INSERT INTO work_outcomes (
        fire_key, tenant, trigger_id, state, attempts, decided_at, first_attempt_at,
        last_attempt_at, http_status, error, source, tzdata_version, src_partition, src_offset
    )
    SELECT fire_key, tenant, trigger_id, state, attempts, decided_at, first_attempt_at,
        last_attempt_at, http_status, error, source, tzdata_version, src_partition, src_offset
    FROM stage_outcomes
    ON CONFLICT (fire_key, src_partition, src_offset) DO NOTHING
    RETURNING fire_key, src_partition, src_offset
), best AS (
    -- one pass over the records stored now: the authoritative one per fire, with the attempt
    -- progress of them all (a window, not a second set joined on fire_key: PostgreSQL estimates
    -- such a join of two derived sets at one row and loops over it, quadratic in the batch)
    SELECT DISTINCT ON (o.fire_key)
        o.fire_key, o.key_hash, o.tenant, o.trigger_id, o.state, o.decided_at, o.source,
        o.src_partition, o.src_offset,
        max(o.attempts) OVER fire AS attempts,
        min(o.first_attempt_at) OVER fire AS first_at,
        max(o.last_attempt_at) OVER fire AS last_at
    FROM stage_outcomes o
    JOIN stored USING (fire_key, src_partition, src_offset)
    WINDOW fire AS (PARTITION BY o.fire_key)
    ORDER BY o.fire_key, (o.source = 'callback') DESC, o.src_partition DESC, o.src_offset DESC
)
INSERT INTO fires AS f (
    fire_key, key_hash, tenant, trigger_id, attempt_count, first_attempt_at, last_attempt_at,
    outcome, outcome_at, outcome_source, outcome_src_partition, outcome_src_offset
)
SELECT b.fire_key, b.key_hash, b.tenant, b.trigger_id, b.attempts, b.first_at, b.last_at,
    b.state, b.decided_at, b.source, b.src_partition, b.src_offset
FROM best b
ON CONFLICT (fire_key) DO UPDATE SET
    attempt_count = GREATEST(f.attempt_count, EXCLUDED.attempt_count),
    first_attempt_at = LEAST(f.first_attempt_at, EXCLUDED.first_attempt_at),
    last_attempt_at = GREATEST(f.last_attempt_at, EXCLUDED.last_attempt_at),
    -- each CASE asks the same: does the new outcome outrank the one the fire shows?
    outcome = CASE WHEN f.outcome_source IS NULL
        OR (EXCLUDED.outcome_source = 'callback', EXCLUDED.outcome_src_partition,
            EXCLUDED.outcome_src_offset)
        > (f.outcome_source = 'callback', f.outcome_src_partition, f.outcome_src_offset)
        THEN EXCLUDED.outcome ELSE f.outcome END,
    outcome_at = CASE WHEN f.outcome_source IS NULL
        OR (EXCLUDED.outcome_source = 'callback', EXCLUDED.outcome_src_partition,
            EXCLUDED.outcome_src_offset)
        > (f.outcome_source = 'callback', f.outcome_src_partition, f.outcome_src_offset)
        THEN EXCLUDED.outcome_at ELSE f.outcome_at END,
    outcome_src_partition = CASE WHEN f.outcome_source IS NULL
        OR (EXCLUDED.outcome_source = 'callback', EXCLUDED.outcome_src_partition,
            EXCLUDED.outcome_src_offset)
        > (f.outcome_source = 'callback', f.outcome_src_partition, f.outcome_src_offset)
        THEN EXCLUDED.outcome_src_partition ELSE f.outcome_src_partition END,
    outcome_src_offset = CASE WHEN f.outcome_source IS NULL
        OR (EXCLUDED.outcome_source = 'callback', EXCLUDED.outcome_src_partition,
            EXCLUDED.outcome_src_offset)
        > (f.outcome_source = 'callback', f.outcome_src_partition, f.outcome_src_offset)
        THEN EXCLUDED.outcome_src_offset ELSE f.outcome_src_offset END,
    outcome_source = CASE WHEN f.outcome_source IS NULL
        OR (EXCLUDED.outcome_source = 'callback', EXCLUDED.outcome_src_partition,
            EXCLUDED.outcome_src_offset)
        > (f.outcome_source = 'callback', f.outcome_src_partition, f.outcome_src_offset)
        THEN EXCLUDED.outcome_source ELSE f.outcome_source END
