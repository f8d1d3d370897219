"""The dispatcher: consumes the dispatch lanes and delivers each committed fire at least once.

Modules: :mod:`.config` (limits and keys), :mod:`.admission` (lane priorities, per-tenant quotas,
shedding order; pure), :mod:`.offsets` (which lane offset may be committed; pure),
:mod:`.records` (attempt, retry, outcome, DLQ and event records of one attempt; pure),
:mod:`.conclude` (the decision core: verdict and records of one attempt; pure, ports only),
:mod:`.deliver` (sign and send one attempt),
:mod:`.breaker` (consecutive failed fires pause a trigger), :mod:`.pump` (the Kafka thread:
consume, commit transactions), :mod:`.worker` (the asyncio loop that sends),
:mod:`.callback` (outcome callbacks), :mod:`.redrive` (DLQ redrive), :mod:`.metrics`.
"""
