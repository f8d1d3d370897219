SELECT n, lane, started_at, ended_at, transport_result, not_sent, duration_ms, http_status, error,
    retry_after_s, next_attempt_at, tzdata_version
FROM attempts
WHERE tenant = %(tenant)s AND fire_key = %(fire_key)s
ORDER BY n
