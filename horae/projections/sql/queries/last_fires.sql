-- The latest fire scheduled before %(before)s of each trigger in %(trigger_ids)s (one tenant):
-- one backward step of the (tenant, trigger_id, scheduled_at, fire_key) index per trigger.
SELECT f.fire_key, f.key_hash, f.tenant, f.trigger_id, f.origin, f.scheduled_at, f.sequence,
    f.jitter_ms, f.due_at, f.decided_at, f.state, f.status, f.cause, f.cause_detail, f.lane,
    f.command_id, f.trigger_version, f.tzdata_version, f.attempt_count, f.first_attempt_at,
    f.last_attempt_at, f.outcome, f.outcome_source, f.terminal_at, f.lateness_ms
FROM unnest(%(trigger_ids)s::text[]) AS t(trigger_id)
CROSS JOIN LATERAL (
    SELECT * FROM fires
    WHERE tenant = %(tenant)s AND trigger_id = t.trigger_id AND scheduled_at < %(before)s
    ORDER BY scheduled_at DESC, fire_key DESC
    LIMIT 1
) AS f
