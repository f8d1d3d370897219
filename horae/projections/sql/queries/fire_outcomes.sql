-- Every outcome of a fire, in the order they were recorded (rows projected before migration
-- 0003 have coordinates (-1, -1)).
SELECT state, source, attempts, decided_at, first_attempt_at, last_attempt_at, http_status, error,
    tzdata_version, src_partition, src_offset
FROM work_outcomes
WHERE tenant = %(tenant)s AND fire_key = %(fire_key)s
ORDER BY src_partition, src_offset
