-- Attempt progress on the fire row (a placeholder if the decision is not seen yet); LEAST and
-- GREATEST make it independent of arrival order and of replays.
INSERT INTO fires AS f (
    fire_key, key_hash, tenant, trigger_id, attempt_count, first_attempt_at, last_attempt_at
)
SELECT fire_key, min(key_hash), min(tenant), min(trigger_id), max(n), min(started_at),
    max(ended_at)
FROM stage_attempts
GROUP BY fire_key
ON CONFLICT (fire_key) DO UPDATE SET
    attempt_count = GREATEST(f.attempt_count, EXCLUDED.attempt_count),
    first_attempt_at = LEAST(f.first_attempt_at, EXCLUDED.first_attempt_at),
    last_attempt_at = GREATEST(f.last_attempt_at, EXCLUDED.last_attempt_at)
