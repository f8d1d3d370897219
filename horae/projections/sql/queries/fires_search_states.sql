-- fires_search.sql, only fires whose shown state (status) is one of %(states)s: for each state
-- one ordered, index-only range of the fires_tenant_status index (it holds trigger_id too), at
-- most a page each, merged; then only the page's rows are read.
WITH page AS (
    SELECT k.scheduled_at, k.fire_key
    FROM unnest(%(states)s::text[]) AS s(status)
    CROSS JOIN LATERAL (
        SELECT scheduled_at, fire_key
        FROM fires
        WHERE tenant = %(tenant)s AND status = s.status
            AND scheduled_at >= %(since)s AND scheduled_at < %(until)s
            AND (%(trigger_ids)s::text[] IS NULL OR trigger_id = ANY(%(trigger_ids)s))
            AND (%(after_at)s::timestamptz IS NULL
                OR (scheduled_at, fire_key) > (%(after_at)s, %(after_key)s))
        ORDER BY scheduled_at, fire_key
        LIMIT %(limit)s
    ) AS k
    ORDER BY k.scheduled_at, k.fire_key
    LIMIT %(limit)s
)
SELECT f.fire_key, f.key_hash, f.tenant, f.trigger_id, f.origin, f.scheduled_at, f.sequence,
    f.jitter_ms, f.due_at, f.decided_at, f.state, f.status, f.cause, f.cause_detail, f.lane,
    f.command_id, f.trigger_version, f.tzdata_version, f.attempt_count, f.first_attempt_at,
    f.last_attempt_at, f.outcome, f.outcome_source, f.terminal_at, f.lateness_ms
FROM page JOIN fires f ON f.fire_key = page.fire_key
ORDER BY f.scheduled_at, f.fire_key
