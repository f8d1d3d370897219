-- The latest version of one trigger of a tenant, in full (NULL if the tenant does not own it):
-- state is the state the planner decides it under (live, paused or deleted: a pause or resume by
-- command included), shown_state what it is doing (live, paused, suspended, completed, deleted).
SELECT v.tenant, v.trigger_id, v.version, st.run_state AS state, st.state AS shown_state,
    v.recurrence, v.target, v.policies, v.quotas, v.authored_at, v.author, v.role, v.description,
    v.labels, v.content_type, v.payload, t.first_authored_at
FROM triggers t
JOIN trigger_versions v USING (tenant, trigger_id, version)
JOIN trigger_states st USING (tenant, trigger_id)
WHERE t.tenant = %(tenant)s AND t.trigger_id = %(trigger_id)s
