-- The decision of a fire key: the first fire record (lowest offset) wins. A row that exists only
-- as a placeholder (attempts/outcomes seen first, decided_at NULL) takes the decision.
-- Every other staged record under a key that has a decision is a second record under that key:
-- it is never applied, but kept in fire_duplicates (once per record coordinates) and returned
-- for the metric, ``identical`` telling a re-sent decision from a different one — except a
-- ``replaced`` record, a state transition that merge/fires_replaced applies. A replay of the
-- applied record itself has its coordinates and is a no-op. Only the records that were not
-- applied are looked up again, so the cost does not grow with the size of the fires table.
WITH applied AS (
    INSERT INTO fires AS f (
        fire_key, key_hash, tenant, trigger_id, origin, scheduled_at, sequence, jitter_ms,
        due_at, decided_at, state, trigger_version, tzdata_version, target_kind, lane, cause,
        cause_detail, command_id, src_partition, src_offset
    )
    SELECT DISTINCT ON (fire_key)
        fire_key, key_hash, tenant, trigger_id, origin, scheduled_at, sequence, jitter_ms,
        due_at, decided_at, state, trigger_version, tzdata_version, target_kind, lane, cause,
        cause_detail, command_id, src_partition, src_offset
    FROM stage_fires
    ORDER BY fire_key, src_topic, src_partition, src_offset
    ON CONFLICT (fire_key) DO UPDATE SET
        key_hash = EXCLUDED.key_hash, tenant = EXCLUDED.tenant,
        trigger_id = EXCLUDED.trigger_id, origin = EXCLUDED.origin,
        scheduled_at = EXCLUDED.scheduled_at, sequence = EXCLUDED.sequence,
        jitter_ms = EXCLUDED.jitter_ms, due_at = EXCLUDED.due_at,
        decided_at = EXCLUDED.decided_at, state = EXCLUDED.state,
        trigger_version = EXCLUDED.trigger_version, tzdata_version = EXCLUDED.tzdata_version,
        target_kind = EXCLUDED.target_kind, lane = EXCLUDED.lane, cause = EXCLUDED.cause,
        cause_detail = EXCLUDED.cause_detail, command_id = EXCLUDED.command_id,
        src_partition = EXCLUDED.src_partition, src_offset = EXCLUDED.src_offset
    WHERE f.decided_at IS NULL
    RETURNING f.fire_key, f.key_hash, f.tenant, f.trigger_id, f.origin, f.scheduled_at,
        f.sequence, f.jitter_ms, f.due_at, f.decided_at, f.state, f.trigger_version,
        f.tzdata_version, f.target_kind, f.lane, f.cause, f.cause_detail, f.command_id,
        f.src_partition, f.src_offset
), rest AS (
    SELECT s.*
    FROM stage_fires s
    WHERE s.state <> 'replaced' AND NOT EXISTS (
        SELECT 1 FROM applied a
        WHERE a.fire_key = s.fire_key AND a.src_partition = s.src_partition
            AND a.src_offset = s.src_offset
    )
)
INSERT INTO fire_duplicates (
    src_topic, src_partition, src_offset, fire_key, identical, tenant, trigger_id, origin,
    scheduled_at, sequence, due_at, decided_at, state, trigger_version, lane, cause
)
SELECT
    r.src_topic, r.src_partition, r.src_offset, r.fire_key,
    (r.key_hash, r.tenant, r.trigger_id, r.origin, r.scheduled_at, r.sequence, r.jitter_ms,
     r.due_at, r.decided_at, r.state, r.trigger_version, r.tzdata_version, r.target_kind, r.lane,
     r.cause, r.cause_detail, r.command_id)
    IS NOT DISTINCT FROM
    (d.key_hash, d.tenant, d.trigger_id, d.origin, d.scheduled_at, d.sequence, d.jitter_ms,
     d.due_at, d.decided_at, d.state, d.trigger_version, d.tzdata_version, d.target_kind, d.lane,
     d.cause, d.cause_detail, d.command_id),
    r.tenant, r.trigger_id, r.origin, r.scheduled_at, r.sequence, r.due_at, r.decided_at,
    r.state, r.trigger_version, r.lane, r.cause
FROM rest r
CROSS JOIN LATERAL (
    -- the decision in force: applied by this statement, or there before it (decided rows only)
    (SELECT a.* FROM applied a WHERE a.fire_key = r.fire_key)
    UNION ALL
    (SELECT f.fire_key, f.key_hash, f.tenant, f.trigger_id, f.origin, f.scheduled_at,
        f.sequence, f.jitter_ms, f.due_at, f.decided_at, f.state, f.trigger_version,
        f.tzdata_version, f.target_kind, f.lane, f.cause, f.cause_detail, f.command_id,
        f.src_partition, f.src_offset
     FROM fires f WHERE f.fire_key = r.fire_key AND f.decided_at IS NOT NULL)
    LIMIT 1
) d
WHERE (r.src_partition, r.src_offset) IS DISTINCT FROM (d.src_partition, d.src_offset)
ON CONFLICT (src_topic, src_partition, src_offset) DO NOTHING
RETURNING identical
