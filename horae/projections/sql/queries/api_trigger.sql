-- The latest version of one trigger of a tenant, in full (NULL if the tenant does not own it),
-- in the state the planner decides it under (a pause or resume by command included).
SELECT v.tenant, v.trigger_id, v.version, st.run_state AS state, v.recurrence, v.target,
    v.policies, v.quotas, v.authored_at, v.author, v.role, v.description, v.labels,
    v.content_type, v.payload, t.first_authored_at
FROM triggers t
JOIN trigger_versions v USING (tenant, trigger_id, version)
JOIN trigger_states st USING (tenant, trigger_id)
WHERE t.tenant = %(tenant)s AND t.trigger_id = %(trigger_id)s
