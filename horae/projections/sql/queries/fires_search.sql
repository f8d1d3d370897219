-- A tenant's fires whose scheduled instant is in [since, until), oldest first, after the cursor
-- (keyset on (scheduled_at, fire_key)), optionally only those of the triggers in
-- %(trigger_ids)s (the triggers a label selects). The page's keys come from the
-- fires_tenant_scheduled index alone (it holds trigger_id: an index-only range, a label's
-- filter included), then only the page's rows are read.
WITH page AS (
    SELECT fire_key
    FROM fires
    WHERE tenant = %(tenant)s
        AND scheduled_at >= %(since)s AND scheduled_at < %(until)s
        AND (%(trigger_ids)s::text[] IS NULL OR trigger_id = ANY(%(trigger_ids)s))
        AND (%(after_at)s::timestamptz IS NULL
            OR (scheduled_at, fire_key) > (%(after_at)s, %(after_key)s))
    ORDER BY scheduled_at, fire_key
    LIMIT %(limit)s
)
SELECT f.fire_key, f.key_hash, f.tenant, f.trigger_id, f.origin, f.scheduled_at, f.sequence,
    f.jitter_ms, f.due_at, f.decided_at, f.state, f.status, f.cause, f.cause_detail, f.lane,
    f.command_id, f.trigger_version, f.tzdata_version, f.attempt_count, f.first_attempt_at,
    f.last_attempt_at, f.outcome, f.outcome_source, f.terminal_at, f.lateness_ms
FROM page JOIN fires f ON f.fire_key = page.fire_key
ORDER BY f.scheduled_at, f.fire_key
