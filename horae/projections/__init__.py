"""PostgreSQL read models of Horae's history (projections).

Nothing here is truth: every row is derived from the topics (definitions, fire ledger, attempts,
outcomes, schedule events, audit) and can be dropped and rebuilt from them.

- :mod:`.schema` — schemas ("generations"), migrations, swap;
- :mod:`.rows` — pure mapping of decoded records to staging rows;
- :mod:`.store` — one batch = one PostgreSQL transaction (rows + consumed offsets);
- :mod:`.projector` — the Kafka consumer loop (``horae projector``);
- :mod:`.rebuild` — replay into a shadow schema, verify row by row, swap;
- :mod:`.queries` — the history queries the API uses;
- :mod:`.metrics` — Prometheus metrics.
"""
