-- Run after fires.sql: every staged record that is not the applied one for its key is a second
-- record under that key. Kept (once per record coordinates) and returned for the metric. A
-- replay of the applied record itself matches its coordinates and is a no-op.
INSERT INTO fire_duplicates (
    src_topic, src_partition, src_offset, fire_key, identical, tenant, trigger_id, origin,
    scheduled_at, sequence, due_at, decided_at, state, trigger_version, lane, cause
)
SELECT
    s.src_topic, s.src_partition, s.src_offset, s.fire_key,
    (s.key_hash, s.tenant, s.trigger_id, s.origin, s.scheduled_at, s.sequence, s.jitter_ms,
     s.due_at, s.decided_at, s.state, s.trigger_version, s.tzdata_version, s.target_kind, s.lane,
     s.cause, s.cause_detail, s.command_id)
    IS NOT DISTINCT FROM
    (f.key_hash, f.tenant, f.trigger_id, f.origin, f.scheduled_at, f.sequence, f.jitter_ms,
     f.due_at, f.decided_at, f.state, f.trigger_version, f.tzdata_version, f.target_kind, f.lane,
     f.cause, f.cause_detail, f.command_id),
    s.tenant, s.trigger_id, s.origin, s.scheduled_at, s.sequence, s.due_at, s.decided_at,
    s.state, s.trigger_version, s.lane, s.cause
FROM stage_fires s
JOIN fires f ON f.fire_key = s.fire_key
WHERE (s.src_partition, s.src_offset) IS DISTINCT FROM (f.src_partition, f.src_offset)
ON CONFLICT (src_topic, src_partition, src_offset) DO NOTHING
RETURNING identical
