-- A tenant's fires whose scheduled instant is in [since, until), oldest first, after the cursor
-- (keyset on (scheduled_at, fire_key): the fires_tenant_scheduled index in order), optionally
-- only those of the triggers in %(trigger_ids)s (the triggers a label selects).
SELECT fire_key, key_hash, tenant, trigger_id, origin, scheduled_at, sequence, jitter_ms, due_at,
    decided_at, state, status, cause, cause_detail, lane, command_id, trigger_version,
    tzdata_version, attempt_count, first_attempt_at, last_attempt_at, outcome, outcome_source,
    terminal_at, lateness_ms
FROM fires
WHERE tenant = %(tenant)s
    AND scheduled_at >= %(since)s AND scheduled_at < %(until)s
    AND (%(trigger_ids)s::text[] IS NULL OR trigger_id = ANY(%(trigger_ids)s))
    AND (%(after_at)s::timestamptz IS NULL OR (scheduled_at, fire_key) > (%(after_at)s, %(after_key)s))
ORDER BY scheduled_at, fire_key
LIMIT %(limit)s
