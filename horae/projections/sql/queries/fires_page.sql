-- Fires of one trigger whose scheduled instant is in [since, until), oldest first, optionally
-- only those whose status or decision state is in %(states)s, after the cursor (keyset on
-- (scheduled_at, fire_key)).
SELECT fire_key, key_hash, tenant, trigger_id, origin, scheduled_at, sequence, jitter_ms, due_at,
    decided_at, state, status, cause, cause_detail, lane, command_id, trigger_version,
    tzdata_version, attempt_count, first_attempt_at, last_attempt_at, outcome, outcome_source,
    terminal_at, lateness_ms
FROM fires
WHERE tenant = %(tenant)s AND trigger_id = %(trigger_id)s
    AND scheduled_at >= %(since)s AND scheduled_at < %(until)s
    AND (%(states)s::text[] IS NULL OR status = ANY(%(states)s) OR state = ANY(%(states)s))
    AND (%(after_at)s::timestamptz IS NULL OR (scheduled_at, fire_key) > (%(after_at)s, %(after_key)s))
ORDER BY scheduled_at, fire_key
LIMIT %(limit)s
