-- fires_search.sql, only fires whose shown state (status) is one of %(states)s: for each state
-- one ordered range of the fires_tenant_status index, at most a page each, merged.
SELECT f.*
FROM unnest(%(states)s::text[]) AS s(status)
CROSS JOIN LATERAL (
    SELECT fire_key, key_hash, tenant, trigger_id, origin, scheduled_at, sequence, jitter_ms,
        due_at, decided_at, state, status, cause, cause_detail, lane, command_id,
        trigger_version, tzdata_version, attempt_count, first_attempt_at, last_attempt_at,
        outcome, outcome_source, terminal_at, lateness_ms
    FROM fires
    WHERE tenant = %(tenant)s AND status = s.status
        AND scheduled_at >= %(since)s AND scheduled_at < %(until)s
        AND (%(trigger_ids)s::text[] IS NULL OR trigger_id = ANY(%(trigger_ids)s))
        AND (%(after_at)s::timestamptz IS NULL
            OR (scheduled_at, fire_key) > (%(after_at)s, %(after_key)s))
    ORDER BY scheduled_at, fire_key
    LIMIT %(limit)s
) AS f
ORDER BY f.scheduled_at, f.fire_key
LIMIT %(limit)s
