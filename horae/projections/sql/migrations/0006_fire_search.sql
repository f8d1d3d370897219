-- Issue 29: a tenant's fires searched by time, state (the shown status) and label (GET /v1/fires,
-- keyset on (scheduled_at, fire_key)), and the oldest fire due, decided and not yet attempted
-- per lane and tenant (the projector's undispatched gauges). On a large fires table these take
-- a while to build, and a plain CREATE INDEX holds writes off meanwhile: build them beforehand
-- with CREATE INDEX CONCURRENTLY under these names (IF NOT EXISTS then skips them).
CREATE INDEX IF NOT EXISTS fires_tenant_scheduled ON fires (tenant, scheduled_at, fire_key)
    INCLUDE (trigger_id);
CREATE INDEX IF NOT EXISTS fires_tenant_status ON fires (tenant, status, scheduled_at, fire_key)
    INCLUDE (trigger_id);
CREATE INDEX IF NOT EXISTS fires_undispatched ON fires (due_at)
    WHERE status = 'fired' AND target_kind = 'webhook';
