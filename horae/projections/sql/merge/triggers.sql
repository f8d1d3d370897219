-- Latest version per trigger: a strictly higher version replaces; first_authored_at is the
-- least authored_at ever seen. Both rules are order-independent.
INSERT INTO triggers AS t (
    tenant, trigger_id, version, state, recurrence, target, policies, authored_at, author,
    description, labels, first_authored_at
)
SELECT DISTINCT ON (tenant, trigger_id)
    tenant, trigger_id, version, state, recurrence::jsonb, target::jsonb, policies::jsonb,
    authored_at, author, description, labels::jsonb,
    min(authored_at) OVER (PARTITION BY tenant, trigger_id)
FROM stage_definitions
ORDER BY tenant, trigger_id, version DESC, src_partition, src_offset
ON CONFLICT (tenant, trigger_id) DO UPDATE SET
    first_authored_at = LEAST(t.first_authored_at, EXCLUDED.first_authored_at),
    state = CASE WHEN EXCLUDED.version > t.version THEN EXCLUDED.state ELSE t.state END,
    recurrence = CASE WHEN EXCLUDED.version > t.version
        THEN EXCLUDED.recurrence ELSE t.recurrence END,
    target = CASE WHEN EXCLUDED.version > t.version THEN EXCLUDED.target ELSE t.target END,
    policies = CASE WHEN EXCLUDED.version > t.version THEN EXCLUDED.policies ELSE t.policies END,
    authored_at = CASE WHEN EXCLUDED.version > t.version
        THEN EXCLUDED.authored_at ELSE t.authored_at END,
    author = CASE WHEN EXCLUDED.version > t.version THEN EXCLUDED.author ELSE t.author END,
    description = CASE WHEN EXCLUDED.version > t.version
        THEN EXCLUDED.description ELSE t.description END,
    labels = CASE WHEN EXCLUDED.version > t.version THEN EXCLUDED.labels ELSE t.labels END,
    version = GREATEST(t.version, EXCLUDED.version)
