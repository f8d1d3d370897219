-- Latest versions of a tenant's triggers, by trigger id after the cursor, optionally only one
-- state (what the trigger is doing: live, paused, suspended, completed or deleted; else every
-- state but deleted) and only those carrying a label; each rendered here as
-- the API's TriggerOut JSON without next_instants (horae.api.render: instants RFC 3339 UTC with
-- "Z", microseconds only when non-zero; payload base64; a sub-record's fields missing from a row
-- projected before they existed take the defaults passed as %(recurrence)s ... %(quotas)s).
-- state: what the trigger is doing; run_state: the state the planner decides it under (live,
-- paused or deleted, a pause or resume by command included: what an amend keeps).
-- recurrence_key: the recurrence as stored (the API compiles each distinct one once).
WITH page AS (
    SELECT v.tenant, v.trigger_id, v.version, st.state, st.run_state, v.recurrence, v.target,
        v.policies, v.quotas, v.authored_at, v.author, v.role, v.description, v.labels,
        v.content_type, v.payload, t.first_authored_at
    FROM triggers t
    JOIN trigger_versions v USING (tenant, trigger_id, version)
    JOIN trigger_states st USING (tenant, trigger_id)
    WHERE t.tenant = %(tenant)s
        AND (%(after)s::text IS NULL OR t.trigger_id > %(after)s)
        AND (CASE WHEN %(state)s::text IS NULL THEN t.state <> 'deleted'
            ELSE st.state = %(state)s END)
        AND (%(labels)s::jsonb IS NULL OR t.labels @> %(labels)s::jsonb)
    ORDER BY t.trigger_id
    LIMIT %(limit)s
), utc AS (
    SELECT page.*, authored_at AT TIME ZONE 'UTC' AS authored_utc,
        first_authored_at AT TIME ZONE 'UTC' AS first_utc
    FROM page
)
SELECT trigger_id, version, state, labels, recurrence::text AS recurrence_key,
    jsonb_build_object(
        'tenant', tenant,
        'trigger_id', trigger_id,
        'version', version,
        'state', state,
        'run_state', run_state,
        'recurrence', replace((%(recurrence)s::jsonb || recurrence)::text, '+00:00"', 'Z"')::jsonb,
        'target', %(target)s::jsonb || target,
        'authored_at', to_char(authored_utc, 'YYYY-MM-DD"T"HH24:MI:SS')
            || CASE WHEN mod(date_part('microseconds', authored_utc)::bigint, 1000000) = 0 THEN ''
                ELSE to_char(authored_utc, '.US') END || 'Z',
        'author', author,
        'role', role,
        'payload', jsonb_build_object('base64', translate(encode(payload, 'base64'), E'\n', '')),
        'content_type', content_type,
        'policies', %(policies)s::jsonb || policies || jsonb_build_object(
            'retry', %(retry)s::jsonb || coalesce(policies -> 'retry', '{}'::jsonb)),
        'quotas', %(quotas)s::jsonb || quotas,
        'description', description,
        'labels', labels,
        'created_at', to_char(first_utc, 'YYYY-MM-DD"T"HH24:MI:SS')
            || CASE WHEN mod(date_part('microseconds', first_utc)::bigint, 1000000) = 0 THEN ''
                ELSE to_char(first_utc, '.US') END || 'Z',
        'updated_at', to_char(authored_utc, 'YYYY-MM-DD"T"HH24:MI:SS')
            || CASE WHEN mod(date_part('microseconds', authored_utc)::bigint, 1000000) = 0 THEN ''
                ELSE to_char(authored_utc, '.US') END || 'Z'
    )::text AS body
FROM utc
ORDER BY trigger_id
