-- Lateness (fires.lateness_ms: first attempt start or, for an event target, decision - due time,
-- ms) percentiles per trigger of a tenant, over fires due in [since, until) that have one.
SELECT trigger_id, count(*) AS fires,
    percentile_cont(0.5) WITHIN GROUP (ORDER BY lateness_ms) AS p50,
    percentile_cont(0.95) WITHIN GROUP (ORDER BY lateness_ms) AS p95,
    percentile_cont(0.99) WITHIN GROUP (ORDER BY lateness_ms) AS p99
FROM fires
WHERE tenant = %(tenant)s AND due_at >= %(since)s AND due_at < %(until)s
    AND lateness_ms IS NOT NULL
    AND (%(trigger_id)s::text IS NULL OR trigger_id = %(trigger_id)s)
GROUP BY trigger_id
ORDER BY trigger_id
