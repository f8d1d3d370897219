-- Every version; the first record of a (trigger, version) wins.
INSERT INTO trigger_versions (
    tenant, trigger_id, version, state, recurrence, target, policies, quotas, authored_at, author,
    role, description, labels, content_type, payload, src_partition, src_offset
)
SELECT DISTINCT ON (tenant, trigger_id, version)
    tenant, trigger_id, version, state, recurrence::jsonb, target::jsonb, policies::jsonb,
    quotas::jsonb, authored_at, author, role, description, labels::jsonb, content_type, payload,
    src_partition, src_offset
FROM stage_definitions
ORDER BY tenant, trigger_id, version, src_partition, src_offset
ON CONFLICT (tenant, trigger_id, version) DO NOTHING
