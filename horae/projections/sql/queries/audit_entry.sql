-- One audit entry of a tenant by its id (a group act's, found by its request id).
SELECT audit_id, tenant, principal, role, action, at, allowed, trigger_id, command_id, detail
FROM audit_entries
WHERE tenant = %(tenant)s AND audit_id = %(audit_id)s
