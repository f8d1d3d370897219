"""PostgreSQL read models of Horae's history (projections).

Nothing here is truth: every row is derived from the topics (accepted definitions, fire ledger,
attempts, outcomes, schedule events, audit) and can be dropped and rebuilt from them.

- :mod:`.schema` — schemas ("generations"), migrations (``sql/migrations``), swap;
- :mod:`.rows` — pure mapping of decoded records to staging rows;
- :mod:`.store` — one batch = one PostgreSQL transaction (rows + consumed offsets);
- :mod:`.projector` — the Kafka consumer loop (``horae projector``);
- :mod:`.rebuild` — replay into a shadow schema, verify row by row, swap;
- :mod:`.queries` — the history queries the API uses;
- :mod:`.roles` — the owner, projector and reader roles and their privileges;
- :mod:`.metrics` — Prometheus metrics; :mod:`.synthetic` — records for tests and benchmarks.

Operations::

    horae migrate                      # as the owner: the live schema, the roles, their grants
    horae projector [--metrics-port N] # project; SIGTERM stops after the batch in flight
    horae projections rebuild          # replay everything into <schema>_shadow (progress bar)
    horae projections verify [--swap]  # compare row by row (exit 1 on divergence); swap it in

Order independence: live consumption and a rebuild interleave the topics differently, so every
merge rule is commutative across topics (first record by offset wins within a key's partition;
attempt/outcome columns merge with LEAST/GREATEST). Known limit: the ledger topic is compacted,
so once compaction has run a rebuild sees only the last record under a fire key, while the live
projection applied the first and kept the later one in ``fire_duplicates``; verify then reports
that divergence (which is the point: a duplicate decision happened).
"""
