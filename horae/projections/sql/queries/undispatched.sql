-- Webhook fires due at %(now)s or before, decided (fired) and not yet attempted, per lane and
-- tenant: how many, and the oldest due time (the fires_undispatched partial index).
SELECT lane, tenant, count(*) AS fires, min(due_at) AS oldest_due_at
FROM fires
WHERE status = 'fired' AND target_kind = 'webhook' AND due_at <= %(now)s
GROUP BY lane, tenant
