-- Attempts: the first record of a (fire key, n) wins.
INSERT INTO attempts (
    fire_key, n, tenant, trigger_id, lane, started_at, ended_at, transport_result, duration_ms,
    http_status, error, retry_after_s, next_attempt_at, tzdata_version, not_sent
)
SELECT DISTINCT ON (fire_key, n)
    fire_key, n, tenant, trigger_id, lane, started_at, ended_at, transport_result, duration_ms,
    http_status, error, retry_after_s, next_attempt_at, tzdata_version, not_sent
FROM stage_attempts
ORDER BY fire_key, n, src_partition, src_offset
ON CONFLICT (fire_key, n) DO NOTHING
