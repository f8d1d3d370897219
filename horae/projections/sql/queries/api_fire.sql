-- One fire of a tenant with its tzdata version and command (NULL if the tenant does not own it).
SELECT fire_key, tenant, trigger_id, origin, scheduled_at, sequence, due_at, decided_at, state,
    status, cause, cause_detail, lane, trigger_version, tzdata_version, command_id, attempt_count,
    first_attempt_at, last_attempt_at, outcome, terminal_at, lateness_ms
FROM fires
WHERE tenant = %(tenant)s AND fire_key = %(fire_key)s
