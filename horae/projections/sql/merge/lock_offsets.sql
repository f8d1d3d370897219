-- Start of a batch: lock and read the stored offsets of the batch's partitions (records below
-- them were applied already by someone: they are dropped) and the schema's generation.
SELECT o.topic, o.partition, o.next_offset
FROM projection_offsets o
JOIN unnest(%(topics)s::text[], %(partitions)s::integer[]) AS b(topic, partition)
    ON b.topic = o.topic AND b.partition = o.partition
FOR UPDATE OF o
