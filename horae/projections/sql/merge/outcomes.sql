-- Outcomes: the first record under a fire key wins; only a newly stored outcome touches the fire.
WITH first AS (
    SELECT DISTINCT ON (fire_key)
        fire_key, key_hash, tenant, trigger_id, state, attempts, decided_at, first_attempt_at,
        last_attempt_at, http_status, error
    FROM stage_outcomes
    ORDER BY fire_key, src_partition, src_offset
), stored AS (
    INSERT INTO work_outcomes (
        fire_key, tenant, trigger_id, state, attempts, decided_at, first_attempt_at,
        last_attempt_at, http_status, error
    )
    SELECT fire_key, tenant, trigger_id, state, attempts, decided_at, first_attempt_at,
        last_attempt_at, http_status, error
    FROM first
    ON CONFLICT (fire_key) DO NOTHING
    RETURNING fire_key
)
INSERT INTO fires AS f (
    fire_key, key_hash, tenant, trigger_id, attempt_count, first_attempt_at, last_attempt_at,
    outcome, outcome_at
)
SELECT o.fire_key, o.key_hash, o.tenant, o.trigger_id, o.attempts, o.first_attempt_at,
    o.last_attempt_at, o.state, o.decided_at
FROM first o
JOIN stored USING (fire_key)
ON CONFLICT (fire_key) DO UPDATE SET
    attempt_count = GREATEST(f.attempt_count, EXCLUDED.attempt_count),
    first_attempt_at = LEAST(f.first_attempt_at, EXCLUDED.first_attempt_at),
    last_attempt_at = GREATEST(f.last_attempt_at, EXCLUDED.last_attempt_at),
    outcome = EXCLUDED.outcome,
    outcome_at = EXCLUDED.outcome_at
