-- Lateness percentiles over all triggers of a tenant, fires due in [since, until).
SELECT count(*) AS fires,
    percentile_cont(0.5) WITHIN GROUP (ORDER BY lateness_ms) AS p50,
    percentile_cont(0.95) WITHIN GROUP (ORDER BY lateness_ms) AS p95,
    percentile_cont(0.99) WITHIN GROUP (ORDER BY lateness_ms) AS p99
FROM fires
WHERE tenant = %(tenant)s AND due_at >= %(since)s AND due_at < %(until)s
    AND lateness_ms IS NOT NULL
