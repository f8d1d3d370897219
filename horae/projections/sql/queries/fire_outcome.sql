SELECT state, attempts, decided_at, first_attempt_at, last_attempt_at, http_status, error
FROM work_outcomes
WHERE tenant = %(tenant)s AND fire_key = %(fire_key)s
