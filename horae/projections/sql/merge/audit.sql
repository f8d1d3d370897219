INSERT INTO audit_entries (
    audit_id, tenant, principal, role, action, at, allowed, trigger_id, command_id, detail
)
SELECT DISTINCT ON (audit_id)
    audit_id, tenant, principal, role, action, at, allowed, trigger_id, command_id, detail::jsonb
FROM stage_audit
ORDER BY audit_id, src_partition, src_offset
ON CONFLICT (audit_id) DO NOTHING
