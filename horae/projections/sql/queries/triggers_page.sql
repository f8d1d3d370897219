-- Triggers of a tenant (latest version), by trigger id, after the cursor.
SELECT tenant, trigger_id, version, state, recurrence, target, policies, authored_at, author,
    description, labels, first_authored_at
FROM triggers
WHERE tenant = %(tenant)s
    AND (%(after)s::text IS NULL OR trigger_id > %(after)s)
    AND (%(include_deleted)s OR state <> 'deleted')
ORDER BY trigger_id
LIMIT %(limit)s
