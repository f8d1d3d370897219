SELECT n, lane, started_at, ended_at, transport_result, duration_ms, http_status, error,
    retry_after_s, next_attempt_at
FROM attempts
WHERE tenant = %(tenant)s AND fire_key = %(fire_key)s
ORDER BY n
