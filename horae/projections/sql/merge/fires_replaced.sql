-- A ``replaced`` record under a fire key decided ``fired``: the planner replaced that fire with a
-- newer one (overlap ``replace``). It is a state transition, not a second decision: the state,
-- cause and detail move, the rest of the decision stays (merge/fires keeps it out of
-- fire_duplicates). Runs after merge/fires, so a fire and its replacement in one batch apply in
-- order; a replay finds the state moved already (a no-op).
UPDATE fires AS f
SET state = s.state, cause = s.cause, cause_detail = s.cause_detail
FROM stage_fires s
WHERE s.state = 'replaced' AND f.fire_key = s.fire_key AND f.state = 'fired'
