-- What the planner applied to each trigger beyond its definition, from the planner's schedule
-- events: a pause or resume by command (the tenant's, or the dispatcher's breaker), and its
-- completion; and each tenant's suspension, from the audit of the platform's commands. The
-- read models show a trigger's state from these (trigger_states), not from its definition alone.
CREATE TABLE trigger_runs (
    tenant text NOT NULL,
    trigger_id text NOT NULL,
    paused boolean,
    pause_changed_at timestamptz,
    pause_version bigint,
    pause_src_offset bigint,
    completed_version bigint,
    PRIMARY KEY (tenant, trigger_id)
);

CREATE TABLE tenant_suspensions (
    tenant text PRIMARY KEY,
    suspended boolean NOT NULL,
    changed_at timestamptz NOT NULL,
    audit_id text NOT NULL
);

CREATE VIEW trigger_states AS
SELECT t.tenant, t.trigger_id, t.version,
    CASE
        WHEN t.state = 'deleted' THEN 'deleted'
        WHEN s.suspended THEN 'suspended'
        WHEN r.pause_version >= t.version AND r.paused THEN 'paused'
        WHEN r.pause_version >= t.version THEN
            CASE WHEN r.completed_version >= t.version THEN 'completed' ELSE 'live' END
        WHEN t.state = 'paused' THEN 'paused'
        WHEN r.completed_version >= t.version THEN 'completed'
        ELSE t.state
    END AS state,
    -- the state the planner decides under: live or paused (a suspension and a completion leave it)
    CASE
        WHEN t.state = 'deleted' THEN 'deleted'
        WHEN r.pause_version >= t.version THEN CASE WHEN r.paused THEN 'paused' ELSE 'live' END
        ELSE t.state
    END AS run_state
FROM triggers t
LEFT JOIN trigger_runs r USING (tenant, trigger_id)
LEFT JOIN tenant_suspensions s ON s.tenant = t.tenant;
