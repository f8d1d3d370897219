-- A tenant's dead letters, oldest death first, after the cursor (keyset on (dead_at, dlq_id)):
-- of the triggers %(trigger_ids)s (NULL: every one), dead in [%(since)s, %(until)s) (NULL: no
-- bound), whose cause holds %(cause)s, in state %(state)s ('dead': never redriven, 'redriven'),
-- with the ids %(ids)s (NULL: any). Each row says when and by whom it was first redriven.
SELECT d.dlq_id, d.link, d.tenant, d.trigger_id, d.fire_key, d.origin, d.scheduled_at, d.lane,
    d.attempt, d.cause, d.dead_at, d.redrive_of, d.record,
    r.at AS redriven_at, r.principal AS redriven_by
FROM dead_letters d
LEFT JOIN LATERAL (
    SELECT a.at, a.principal FROM audit_entries a
    WHERE a.tenant = d.tenant AND a.action = 'dlq.redrive' AND a.detail ->> 'dlq' = d.link
    ORDER BY a.at LIMIT 1
) r ON true
WHERE d.tenant = %(tenant)s
    AND (%(ids)s::text[] IS NULL OR d.dlq_id = ANY(%(ids)s::text[]))
    AND (%(trigger_ids)s::text[] IS NULL OR d.trigger_id = ANY(%(trigger_ids)s::text[]))
    AND (%(since)s::timestamptz IS NULL OR d.dead_at >= %(since)s::timestamptz)
    AND (%(until)s::timestamptz IS NULL OR d.dead_at < %(until)s::timestamptz)
    AND (%(cause)s::text IS NULL OR strpos(d.cause, %(cause)s::text) > 0)
    AND (%(state)s::text IS NULL OR (%(state)s::text = 'redriven') = (r.at IS NOT NULL))
    AND (%(after_at)s::timestamptz IS NULL
        OR (d.dead_at, d.dlq_id) > (%(after_at)s::timestamptz, %(after_key)s::text))
ORDER BY d.dead_at, d.dlq_id
LIMIT %(limit)s
