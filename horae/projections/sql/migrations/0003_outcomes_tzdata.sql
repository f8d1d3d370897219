-- Every outcome of a fire is kept (the dispatcher's own and each callback's), and the fire shows
-- the authoritative one: a callback's outranks the dispatcher's, and within a source the later
-- record (higher offset) wins. Attempts, outcomes and events keep the fire's tzdata version; an
-- attempt that never ran keeps why (not_sent). Outcomes with an unknown result show `unknown`.

-- Outcomes: one row per record (its coordinates on the outcomes topic). Rows projected before
-- this migration have no coordinates (-1, -1): each was the first outcome of its fire.
ALTER TABLE work_outcomes DROP CONSTRAINT work_outcomes_pkey;
ALTER TABLE work_outcomes
    ADD COLUMN source text,
    ADD COLUMN tzdata_version text,
    ADD COLUMN src_partition integer,
    ADD COLUMN src_offset bigint;
UPDATE work_outcomes SET
    source = CASE WHEN first_attempt_at IS NULL THEN 'callback' ELSE 'dispatcher' END,
    src_partition = -1,
    src_offset = -1,
    state = CASE WHEN state = 'exhausted' AND error LIKE 'unknown: %' THEN 'unknown' ELSE state END;
ALTER TABLE work_outcomes
    ALTER COLUMN source SET NOT NULL,
    ALTER COLUMN src_partition SET NOT NULL,
    ALTER COLUMN src_offset SET NOT NULL,
    ADD PRIMARY KEY (fire_key, src_partition, src_offset);

ALTER TABLE attempts ADD COLUMN tzdata_version text, ADD COLUMN not_sent text;
ALTER TABLE schedule_events ADD COLUMN tzdata_version text;

-- The fire's authoritative outcome: which record it is.
ALTER TABLE fires
    ADD COLUMN outcome_source text,
    ADD COLUMN outcome_src_partition integer,
    ADD COLUMN outcome_src_offset bigint;
UPDATE fires f SET
    outcome = o.state,
    outcome_source = o.source,
    outcome_src_partition = -1,
    outcome_src_offset = -1
FROM work_outcomes o
WHERE o.fire_key = f.fire_key AND f.outcome IS NOT NULL;

-- A fire row seen before its decision now says `undecided` (`unknown` is an outcome).
ALTER TABLE fires DROP COLUMN status;
ALTER TABLE fires ADD COLUMN status text GENERATED ALWAYS AS (
    CASE
        WHEN outcome IS NOT NULL THEN outcome
        WHEN state IS NULL THEN 'undecided'
        WHEN state = 'fired' AND attempt_count > 0 THEN 'dispatching'
        ELSE state
    END
) STORED;
