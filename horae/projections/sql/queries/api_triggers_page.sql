-- Latest versions of a tenant's triggers in full, by trigger id after the cursor, optionally
-- only one state (else every state but deleted) and only those carrying a label.
SELECT v.tenant, v.trigger_id, v.version, v.state, v.recurrence, v.target, v.policies, v.quotas,
    v.authored_at, v.author, v.role, v.description, v.labels, v.content_type, v.payload,
    t.first_authored_at
FROM triggers t
JOIN trigger_versions v USING (tenant, trigger_id, version)
WHERE t.tenant = %(tenant)s
    AND (%(after)s::text IS NULL OR t.trigger_id > %(after)s)
    AND (CASE WHEN %(state)s::text IS NULL THEN t.state <> 'deleted' ELSE t.state = %(state)s END)
    AND (%(labels)s::jsonb IS NULL OR t.labels @> %(labels)s::jsonb)
ORDER BY t.trigger_id
LIMIT %(limit)s
