-- Fires of one trigger whose scheduled instant is in [since, until), oldest first, with the
-- tzdata version (see fires_page.sql for the filters and the keyset).
SELECT fire_key, tenant, trigger_id, origin, scheduled_at, sequence, due_at, decided_at, state,
    status, cause, cause_detail, lane, trigger_version, tzdata_version, attempt_count,
    first_attempt_at, last_attempt_at, outcome, terminal_at, lateness_ms
FROM fires
WHERE tenant = %(tenant)s AND trigger_id = %(trigger_id)s
    AND scheduled_at >= %(since)s AND scheduled_at < %(until)s
    AND (%(states)s::text[] IS NULL OR status = ANY(%(states)s) OR state = ANY(%(states)s))
    AND (%(after_at)s::timestamptz IS NULL OR (scheduled_at, fire_key) > (%(after_at)s, %(after_key)s))
ORDER BY scheduled_at, fire_key
LIMIT %(limit)s
