"""Hypothesis strategies the contract tests share: Avro longs, and instants, aware (UTC or a
fixed offset) across the whole range a ``timestamp-micros`` holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import strategies as st

LONG = st.integers(-(2**63), 2**63 - 1)
INSTANT = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
) | st.builds(
    lambda d, h: d.replace(tzinfo=timezone(timedelta(hours=h))),
    st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1)),
    st.integers(-12, 12),
)
