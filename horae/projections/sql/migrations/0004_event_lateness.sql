-- Event targets report a lateness too: a fired event target's is its decision's (decided_at
-- minus due_at: the planner commits the event with the fire record, nothing is attempted); a
-- webhook's stays its first attempt's start minus the due time. Rows already projected get
-- theirs at once (a generated column is computed from the row).
ALTER TABLE fires DROP COLUMN lateness_ms;
ALTER TABLE fires ADD COLUMN lateness_ms double precision GENERATED ALWAYS AS (
    CASE
        WHEN target_kind = 'event' THEN CASE
            WHEN state = 'fired'
                THEN extract(epoch FROM (decided_at - due_at))::double precision * 1000.0
        END
        ELSE extract(epoch FROM (first_attempt_at - due_at))::double precision * 1000.0
    END
) STORED;
