-- What the planner applied to a trigger, from its events: the latest pause or resume (the higher
-- trigger version, then the higher offset: a trigger's planner events share one partition of its
-- tenant's topic) and the highest version completed. Both rules are order-independent.
INSERT INTO trigger_runs AS r (
    tenant, trigger_id, paused, pause_changed_at, pause_version, pause_src_offset,
    completed_version
)
SELECT tenant, trigger_id,
    (array_agg(type = 'schedule.paused' ORDER BY trigger_version DESC, src_offset DESC)
        FILTER (WHERE type <> 'schedule.completed'))[1],
    (array_agg(emitted_at ORDER BY trigger_version DESC, src_offset DESC)
        FILTER (WHERE type <> 'schedule.completed'))[1],
    (array_agg(trigger_version ORDER BY trigger_version DESC, src_offset DESC)
        FILTER (WHERE type <> 'schedule.completed'))[1],
    (array_agg(src_offset ORDER BY trigger_version DESC, src_offset DESC)
        FILTER (WHERE type <> 'schedule.completed'))[1],
    max(trigger_version) FILTER (WHERE type = 'schedule.completed')
FROM stage_schedule_events
WHERE type IN ('schedule.paused', 'schedule.resumed', 'schedule.completed')
GROUP BY tenant, trigger_id
ON CONFLICT (tenant, trigger_id) DO UPDATE SET
    paused = CASE WHEN (EXCLUDED.pause_version, EXCLUDED.pause_src_offset)
            > (coalesce(r.pause_version, -1), coalesce(r.pause_src_offset, -1))
        THEN EXCLUDED.paused ELSE r.paused END,
    pause_changed_at = CASE WHEN (EXCLUDED.pause_version, EXCLUDED.pause_src_offset)
            > (coalesce(r.pause_version, -1), coalesce(r.pause_src_offset, -1))
        THEN EXCLUDED.pause_changed_at ELSE r.pause_changed_at END,
    pause_version = CASE WHEN (EXCLUDED.pause_version, EXCLUDED.pause_src_offset)
            > (coalesce(r.pause_version, -1), coalesce(r.pause_src_offset, -1))
        THEN EXCLUDED.pause_version ELSE r.pause_version END,
    pause_src_offset = CASE WHEN (EXCLUDED.pause_version, EXCLUDED.pause_src_offset)
            > (coalesce(r.pause_version, -1), coalesce(r.pause_src_offset, -1))
        THEN EXCLUDED.pause_src_offset ELSE r.pause_src_offset END,
    completed_version = GREATEST(r.completed_version, EXCLUDED.completed_version)
