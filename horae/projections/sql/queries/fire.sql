-- One fire of a tenant (NULL if the tenant does not own it); its outcome columns are the
-- authoritative outcome's.
SELECT fire_key, key_hash, tenant, trigger_id, origin, scheduled_at, sequence, jitter_ms, due_at,
    decided_at, state, status, cause, cause_detail, lane, command_id, trigger_version,
    tzdata_version, attempt_count, first_attempt_at, last_attempt_at, outcome, outcome_at,
    outcome_source, outcome_src_partition, outcome_src_offset, terminal_at, lateness_ms
FROM fires
WHERE tenant = %(tenant)s AND fire_key = %(fire_key)s
