INSERT INTO schedule_events (
    event_id, type, tenant, trigger_id, emitted_at, trigger_version, fire_key, origin,
    scheduled_at, due_at, cause, attempt, http_status, tzdata_version
)
SELECT DISTINCT ON (event_id)
    event_id, type, tenant, trigger_id, emitted_at, trigger_version, fire_key, origin,
    scheduled_at, due_at, cause, attempt, http_status, tzdata_version
FROM stage_schedule_events
ORDER BY event_id, src_partition, src_offset
ON CONFLICT (event_id) DO NOTHING
