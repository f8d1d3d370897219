-- The audit entries of a tenant in [since, until), oldest first, after the cursor (keyset on
-- (at, audit_id)).
SELECT audit_id, tenant, principal, role, action, at, allowed, trigger_id, command_id, detail
FROM audit_entries
WHERE tenant = %(tenant)s AND at >= %(since)s AND at < %(until)s
    AND (%(after_at)s::timestamptz IS NULL OR (at, audit_id) > (%(after_at)s, %(after_key)s))
ORDER BY at, audit_id
LIMIT %(limit)s
