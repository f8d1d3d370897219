-- The schedule events of one trigger, oldest first, after the cursor (keyset on
-- (emitted_at, event_id)).
SELECT event_id, type, tenant, trigger_id, emitted_at, trigger_version, fire_key, origin,
    scheduled_at, due_at, cause, attempt, http_status
FROM schedule_events
WHERE tenant = %(tenant)s AND trigger_id = %(trigger_id)s
    AND (%(after_at)s::timestamptz IS NULL OR (emitted_at, event_id) > (%(after_at)s, %(after_key)s))
ORDER BY emitted_at, event_id
LIMIT %(limit)s
