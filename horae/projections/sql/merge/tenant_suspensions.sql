-- A tenant's suspension: the latest allowed tenant.suspend / tenant.resume (by time, then audit
-- id; a platform command is applied once per partition, each audited). Order-independent.
INSERT INTO tenant_suspensions AS s (tenant, suspended, changed_at, audit_id)
SELECT DISTINCT ON (tenant) tenant, action = 'tenant.suspend', at, audit_id
FROM stage_audit
WHERE allowed AND action IN ('tenant.suspend', 'tenant.resume')
ORDER BY tenant, at DESC, audit_id DESC
ON CONFLICT (tenant) DO UPDATE SET
    suspended = CASE WHEN (EXCLUDED.changed_at, EXCLUDED.audit_id) > (s.changed_at, s.audit_id)
        THEN EXCLUDED.suspended ELSE s.suspended END,
    audit_id = CASE WHEN (EXCLUDED.changed_at, EXCLUDED.audit_id) > (s.changed_at, s.audit_id)
        THEN EXCLUDED.audit_id ELSE s.audit_id END,
    changed_at = GREATEST(s.changed_at, EXCLUDED.changed_at)
