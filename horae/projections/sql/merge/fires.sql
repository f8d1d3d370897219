-- The decision of a fire key: the first fire record (lowest offset) wins. A row that exists only
-- as a placeholder (attempts/outcomes seen first, decided_at NULL) takes the decision.
INSERT INTO fires AS f (
    fire_key, key_hash, tenant, trigger_id, origin, scheduled_at, sequence, jitter_ms, due_at,
    decided_at, state, trigger_version, tzdata_version, target_kind, lane, cause, cause_detail,
    command_id, src_partition, src_offset
)
SELECT DISTINCT ON (fire_key)
    fire_key, key_hash, tenant, trigger_id, origin, scheduled_at, sequence, jitter_ms, due_at,
    decided_at, state, trigger_version, tzdata_version, target_kind, lane, cause, cause_detail,
    command_id, src_partition, src_offset
FROM stage_fires
ORDER BY fire_key, src_topic, src_partition, src_offset
ON CONFLICT (fire_key) DO UPDATE SET
    key_hash = EXCLUDED.key_hash, tenant = EXCLUDED.tenant, trigger_id = EXCLUDED.trigger_id,
    origin = EXCLUDED.origin, scheduled_at = EXCLUDED.scheduled_at,
    sequence = EXCLUDED.sequence, jitter_ms = EXCLUDED.jitter_ms, due_at = EXCLUDED.due_at,
    decided_at = EXCLUDED.decided_at, state = EXCLUDED.state,
    trigger_version = EXCLUDED.trigger_version, tzdata_version = EXCLUDED.tzdata_version,
    target_kind = EXCLUDED.target_kind, lane = EXCLUDED.lane, cause = EXCLUDED.cause,
    cause_detail = EXCLUDED.cause_detail, command_id = EXCLUDED.command_id,
    src_partition = EXCLUDED.src_partition, src_offset = EXCLUDED.src_offset
WHERE f.decided_at IS NULL
