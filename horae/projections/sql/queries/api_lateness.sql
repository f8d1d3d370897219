-- Lateness (ms, fires.lateness_ms) of the fires due in [since, until) that have one, and the
-- missed count (decided not to fire: skipped, expired, shed, rejected): the total first
-- (trigger_id NULL), then per trigger of a tenant (or of one trigger).
SELECT trigger_id,
    count(lateness_ms) AS fires,
    percentile_cont(0.5) WITHIN GROUP (ORDER BY lateness_ms) AS p50,
    percentile_cont(0.99) WITHIN GROUP (ORDER BY lateness_ms) AS p99,
    max(lateness_ms) AS max,
    count(*) FILTER (WHERE state IN ('skipped', 'expired', 'shed', 'rejected')) AS missed
FROM fires
WHERE tenant = %(tenant)s AND due_at >= %(since)s AND due_at < %(until)s
    AND (%(trigger_id)s::text IS NULL OR trigger_id = %(trigger_id)s)
GROUP BY GROUPING SETS ((trigger_id), ())
ORDER BY GROUPING(trigger_id) DESC, trigger_id
