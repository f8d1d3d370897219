"""Independent test oracle: a brute-force minute scan in the zone, with Debian DST rules.

Written separately from :mod:`horae.domain` and deliberately simple: walk UTC minute by minute,
convert each to the local wall clock with :mod:`zoneinfo` (UTC -> local only, never the reverse),
and decide by the rules as stated in the issue:

- a wall minute seen for the second time (the clock went back) is a *second pass*;
- wall minutes jumped over (the clock went forward) are *skipped*; a fixed-time job with any skipped
  minute matching fires at the first minute after the jump (gap ``shift``);
- wildcard jobs (minute or hour field starting with ``*``) fire at every matching real minute.

Cron fields are parsed by cronsim (a different parser than ours), used here only as a parser.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim

ZONES = (
    "UTC",
    "America/New_York",
    "America/Los_Angeles",
    "America/Havana",
    "America/Sao_Paulo",
    "America/Santiago",
    "America/Asuncion",
    "America/St_Johns",
    "America/Godthab",
    "Europe/Dublin",
    "Europe/London",
    "Europe/Berlin",
    "Europe/Moscow",
    "Africa/Casablanca",
    "Africa/Cairo",
    "Asia/Tehran",
    "Asia/Jerusalem",
    "Asia/Kolkata",
    "Asia/Gaza",
    "Australia/Lord_Howe",
    "Australia/Sydney",
    "Australia/Adelaide",
    "Pacific/Auckland",
    "Pacific/Chatham",
    "Antarctica/Troll",
    "Pacific/Apia",
)


def _offset(zone: ZoneInfo, u: int) -> timedelta:
    off = datetime.fromtimestamp(u, zone).utcoffset()
    assert off is not None
    return off


@functools.cache
def transitions(key: str, first_year: int = 2020, last_year: int = 2027) -> tuple[int, ...]:
    """UTC instants (whole minutes) where the zone's offset changes, years inclusive."""
    zone = ZoneInfo(key)
    lo = int(datetime(first_year, 1, 1, tzinfo=UTC).timestamp())
    hi = int(datetime(last_year + 1, 1, 1, tzinfo=UTC).timestamp())
    out = []
    prev = _offset(zone, lo)
    for u in range(lo + 21600, hi, 21600):
        cur = _offset(zone, u)
        if cur != prev:
            m = u - 21600
            while _offset(zone, m) == prev:
                m += 60
            out.append(m)
            prev = cur
    return tuple(out)


# One scanned minute: (utc, minute, hour, day, month, dow 0=Sunday, second_pass, skipped walls)
# where skipped walls are the (minute, hour, day, month, dow) of wall minutes jumped over just
# before this one.
Wall = tuple[int, int, int, int, int]
Minute = tuple[int, int, int, int, int, int, bool, tuple[Wall, ...]]
BLOCK_S = 2 * 86400
_EPOCH = datetime(1970, 1, 1)


def _wall_fields(wall: int) -> Wall:
    moment = _EPOCH + timedelta(seconds=wall)
    return (moment.minute, moment.hour, moment.day, moment.month, (moment.weekday() + 1) % 7)


@functools.lru_cache(maxsize=4096)
def _block(key: str, block: int) -> tuple[Minute, ...]:
    """Every UTC minute of block ``[block * BLOCK_S, (block + 1) * BLOCK_S)``, with DST facts."""
    zone = ZoneInfo(key)
    lo, hi = block * BLOCK_S, (block + 1) * BLOCK_S
    highest = prev = None
    out = []
    for u in range(lo - 6 * 3600, hi, 60):
        moment = datetime.fromtimestamp(u, zone)
        offset = moment.utcoffset()
        assert offset is not None
        wall = u + int(offset.total_seconds())  # local clock reading as seconds
        second = highest is not None and wall <= highest
        skipped: tuple[Wall, ...] = ()
        if prev is not None and wall - prev > 60:
            skipped = tuple(_wall_fields(w) for w in range(prev + 60, wall, 60))
        if u >= lo:
            dow = (moment.weekday() + 1) % 7
            fields = (moment.minute, moment.hour, moment.day, moment.month, dow)
            out.append((u, *fields, second, skipped))
        prev = wall
        highest = wall if highest is None else max(highest, wall)
    return tuple(out)


def minute_table(key: str, lo: int, hi: int) -> list[Minute]:
    """Every UTC minute in [lo, hi) with its wall time and DST facts."""
    out: list[Minute] = []
    for block in range(lo // BLOCK_S, (hi - 1) // BLOCK_S + 1):
        table = _block(key, block)
        first = max(0, -(-(lo - block * BLOCK_S) // 60))
        last = min(len(table), (hi - block * BLOCK_S + 59) // 60)
        out.extend(table[first:last])
    return out


class OracleCron:
    def __init__(self, expr: str) -> None:
        sim = CronSim(expr, datetime(2026, 1, 1, tzinfo=UTC))
        parts = expr.split()
        self.minutes = set(sim.minutes)
        self.hours = set(sim.hours)
        self.days = set(sim.days)
        self.months = set(sim.months)
        self.weekdays = {d % 7 for d in sim.weekdays if isinstance(d, int)}
        self.day_and = sim.day_and
        self.fixed = not parts[0].startswith("*") and not parts[1].startswith("*")

    def matches(self, minute: int, hour: int, day: int, month: int, dow: int) -> bool:
        if minute not in self.minutes or hour not in self.hours or month not in self.months:
            return False
        dom_ok = day in self.days
        dow_ok = dow in self.weekdays
        return (dom_ok and dow_ok) if self.day_and else (dom_ok or dow_ok)


def oracle_instants(
    expr: str, key: str, start: int, end: int, *, shift: bool = True, both: bool = False
) -> list[int]:
    """Instants of a 5-field ``expr`` in zone ``key`` within [start, end) (start whole minute)."""
    cron = OracleCron(expr)
    out = []
    for utc, minute, hour, day, month, dow, second_pass, skipped in minute_table(key, start, end):
        fire = cron.matches(minute, hour, day, month, dow) and (
            not second_pass or not cron.fixed or both
        )
        if cron.fixed and shift and any(cron.matches(*w) for w in skipped):
            fire = True
        if fire:
            out.append(utc)
    return out
