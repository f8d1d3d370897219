INSERT INTO dead_letters (
    dlq_id, link, tenant, trigger_id, fire_key, origin, scheduled_at, lane, attempt, cause,
    dead_at, redrive_of, record
)
SELECT DISTINCT ON (dlq_id)
    dlq_id, link, tenant, trigger_id, fire_key, origin, scheduled_at, lane, attempt, cause,
    dead_at, redrive_of, record
FROM stage_dead_letters
ORDER BY dlq_id, src_partition, src_offset
ON CONFLICT (dlq_id) DO NOTHING
