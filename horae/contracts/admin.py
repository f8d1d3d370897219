"""Moved to :mod:`horae.kafka.admin` (topic administration is a Kafka adapter, not a contract).

This name stays only until its last importers — ``horae/streams/planner/worker.py``, ``bench/``
and ``tests/acceptance/test_console.py`` — import :mod:`horae.kafka.admin`; the layer test
(``tests/unit/test_layers.py``) lists it as the one contracts module allowed to import an
adapter meanwhile, and fails once nothing needs it.
"""

from horae.kafka.admin import MIN_PREFIX_LENGTH as MIN_PREFIX_LENGTH
from horae.kafka.admin import TIMEOUT_S as TIMEOUT_S
from horae.kafka.admin import Drift as Drift
from horae.kafka.admin import Observed as Observed
from horae.kafka.admin import Plan as Plan
from horae.kafka.admin import TenantTopics as TenantTopics
from horae.kafka.admin import admin_client as admin_client
from horae.kafka.admin import apply as apply
from horae.kafka.admin import auto_replication_factor as auto_replication_factor
from horae.kafka.admin import delete_under as delete_under
from horae.kafka.admin import drift as drift
from horae.kafka.admin import ensure_topic as ensure_topic
from horae.kafka.admin import observe as observe
from horae.kafka.admin import topics_under as topics_under
