-- The ids of a tenant's triggers whose latest version has every label of %(labels)s (jsonb).
SELECT trigger_id FROM triggers WHERE tenant = %(tenant)s AND labels @> %(labels)s::jsonb
