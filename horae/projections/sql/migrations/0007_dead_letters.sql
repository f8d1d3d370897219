-- Issue 29: a tenant's dead letters (the dlq topic: fires the dispatcher gave up on), listed by
-- when they died (keyset on (dead_at, dlq_id)), each with the order to send again (``record``:
-- the DLQ record's value as written) and the link a redrive carries (``link``:
-- <topic>:<partition>:<offset>, the ``horae-redrive-of`` header and a redrive's audit detail
-- ``dlq``); whether one was redriven is read from its ``dlq.redrive`` audit entries.
CREATE TABLE dead_letters (
    dlq_id text PRIMARY KEY,
    link text NOT NULL,
    tenant text NOT NULL,
    trigger_id text NOT NULL,
    fire_key text NOT NULL,
    origin text NOT NULL,
    scheduled_at timestamptz NOT NULL,
    lane text NOT NULL,
    attempt integer NOT NULL,
    cause text NOT NULL,
    dead_at timestamptz NOT NULL,
    redrive_of text,
    record bytea NOT NULL
);
CREATE INDEX dead_letters_tenant_dead ON dead_letters (tenant, dead_at, dlq_id);
CREATE INDEX dead_letters_tenant_trigger ON dead_letters (tenant, trigger_id, dead_at, dlq_id);
CREATE INDEX audit_entries_redrive ON audit_entries (tenant, (detail ->> 'dlq'), at)
    WHERE action = 'dlq.redrive';
