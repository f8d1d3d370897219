-- The next offset per partition, in the same transaction as the batch's rows.
INSERT INTO projection_offsets (topic, partition, next_offset)
SELECT * FROM unnest(%(topics)s::text[], %(partitions)s::integer[], %(offsets)s::bigint[])
ON CONFLICT (topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset
