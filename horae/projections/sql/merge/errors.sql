INSERT INTO projection_errors (
    topic, partition, "offset", cause, detail, record_key, record_value, record_ts
)
SELECT topic, partition, "offset", cause, detail, record_key, record_value, record_ts
FROM stage_errors
ON CONFLICT (topic, partition, "offset") DO NOTHING
