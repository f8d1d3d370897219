"""Plain words for what a definition says: its schedule, its policies, its target.

Pure functions of the definition's JSON (TriggerOut); no I/O. The schedule in words is a reading
aid beside the expression, never a second implementation of it: the instants the console shows
are the API's dry-run (the planner's own code), and an expression these words do not cover reads
"custom schedule".
"""

from __future__ import annotations

from typing import Any

from horae.delivery.table import describe
from horae.domain.cron import MACROS

DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
NAMED_DAYS = {d[:3].lower(): i for i, d in enumerate(DAYS)}
NAMED_MONTHS = {m[:3].lower(): i + 1 for i, m in enumerate(MONTHS)}


def _every(seconds: int) -> str:
    for unit, size in (("day", 86_400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            n = seconds // size
            return f"every {unit}" if n == 1 else f"every {n} {unit}s"
    return "every second" if seconds == 1 else f"every {seconds} seconds"


def _day(field: str) -> str | None:
    names = []
    for part in field.lower().split(","):
        if "-" in part:
            a, _, b = part.partition("-")
            lo, hi = NAMED_DAYS.get(a, a), NAMED_DAYS.get(b, b)
            if not (str(lo).isdigit() and str(hi).isdigit()):
                return None
            lo, hi = int(lo) % 7, int(hi) % 7
            if (lo, hi) == (1, 5):
                names.append("weekdays")
            else:
                names.append(f"{DAYS[lo]} to {DAYS[hi]}")
            continue
        value = NAMED_DAYS.get(part, part)
        if not str(value).isdigit() or int(value) > 7:
            return None
        names.append(DAYS[int(value) % 7])
    return ", ".join(names)


_ORDINALS = ("first", "second", "third", "fourth", "fifth")


def _quartz_day(dom: str, dow: str) -> str | None:
    """Words for a lone Quartz day term (``L``, ``L-n``, ``LW``, ``nW`` in the day of month with
    ``*`` beside it, or ``dL``, ``d#k`` in the day of week with ``*`` beside it), else None."""
    if dow == "*" and dom != "*":
        term = dom.upper()
        if term == "L":
            return "on the last day of the month"
        if term == "LW":
            return "on the last weekday of the month"
        if term.startswith("L-") and term[2:].isdigit():
            n = int(term[2:])
            return f"{n} day{'s' if n != 1 else ''} before the last day of the month"
        if term.endswith("W") and term[:-1].isdigit():
            return f"on the weekday nearest day {int(term[:-1])} of the month"
        return None
    if dom == "*" and dow != "*":
        term = dow.lower()
        base, nth = (term[:-1], "last") if term.endswith("l") else term.partition("#")[::2]
        day = NAMED_DAYS.get(base, int(base) if base.isdigit() and int(base) <= 7 else None)
        if day is None or not nth:
            return None
        if nth != "last":
            if not nth.isdigit() or not 1 <= int(nth) <= 5:
                return None
            nth = _ORDINALS[int(nth) - 1]
        return f"on the {nth} {DAYS[day % 7]} of the month"
    return None


def _number(field: str, top: int) -> int | None:
    return int(field) if field.isdigit() and int(field) < top else None


def cron_words(expr: str) -> str:
    """``"0 9 * * 1-5"`` → ``"at 09:00 on weekdays"``; "custom schedule" when not covered."""
    fields = MACROS.get(expr.strip().lower(), expr).split()
    if len(fields) == 5:
        fields = ["0", *fields]
    if len(fields) != 6:
        return "custom schedule"
    second, minute, hour, dom, month, dow = fields
    when: str | None = None
    if second.startswith("*/") and minute == hour == "*" and second[2:].isdigit():
        when = _every(int(second[2:]))
    elif second == "*" and minute == hour == "*":
        when = "every second"
    elif _number(second, 60) is not None and minute.startswith("*/") and hour == "*":
        step = minute[2:]
        when = _every(int(step) * 60) if step.isdigit() else None
    elif _number(second, 60) is not None and minute == "*" and hour == "*":
        when = "every minute"
    elif (s := _number(second, 60)) is not None and (m := _number(minute, 60)) is not None:
        if hour == "*":
            when = f"every hour at minute {m}"
        elif hour.startswith("*/") and hour[2:].isdigit():
            when = f"{_every(int(hour[2:]) * 3600)} at minute {m}"
        else:
            hours = [_number(h, 24) for h in hour.split(",")]
            if hours and all(h is not None for h in hours):
                sec = f":{s:02d}" if s else ""
                when = "at " + ", ".join(f"{h:02d}:{m:02d}{sec}" for h in hours if h is not None)
    if when is None:
        return "custom schedule"
    parts = [when]
    quartz = _quartz_day(dom, dow)
    if quartz is not None:
        dom = dow = "*"
        parts.append(quartz)
    if dom != "*" and dom != "?":
        if not all(p.isdigit() for p in dom.split(",")):
            return "custom schedule"
        parts.append("on day " + ", ".join(dom.split(",")) + " of the month")
    if month != "*":
        names = [NAMED_MONTHS.get(p.lower(), p) for p in month.split(",")]
        if not all(str(n).isdigit() and 1 <= int(n) <= 12 for n in names):
            return "custom schedule"
        parts.append("in " + ", ".join(MONTHS[int(n) - 1] for n in names))
    if dow != "*" and dow != "?":
        days = _day(dow)
        if days is None:
            return "custom schedule"
        parts.append(f"on {days}")
    return " ".join(parts)


def schedule_words(recurrence: dict[str, Any]) -> str:
    kind = recurrence.get("kind")
    zone = recurrence.get("zone") or "UTC"
    if kind == "cron":
        text = f"{cron_words(str(recurrence.get('expr') or ''))} ({zone})"
    elif kind == "every":
        text = _every(int(recurrence.get("interval_s") or 0))
    elif kind == "at":
        n = len(recurrence.get("instants") or [])
        text = "once" if n == 1 else f"at {n} set instants"
    else:
        return "custom schedule"
    if recurrence.get("count"):
        text += f", {recurrence['count']} times"
    return text


def expression(recurrence: dict[str, Any]) -> str:
    kind = recurrence.get("kind")
    if kind == "cron":
        return str(recurrence.get("expr") or "")
    if kind == "every":
        return f"@every {recurrence.get('interval_s')}s"
    return "@at " + ", ".join(str(i) for i in recurrence.get("instants") or [])


def target_words(target: dict[str, Any]) -> str:
    """The target in one line, as its kind's deliverer says it (the CLI's listings say the
    same)."""
    return describe(target)


MISFIRE = {
    "fire_once": "after an outage (or a pause), only the latest missed instant fires, late, on "
    "the catch-up lane (none if an on-time instant fires with it); the others are recorded "
    "skipped; instants older than the horizon are expired",
    "fire_all": "after an outage (or a pause), the latest max_catchup missed instants fire, late, "
    "on the catch-up lane; the others are recorded skipped",
    "skip": "after an outage (or a pause), missed instants are recorded skipped, none fires",
}
OVERLAP = {
    "allow": "a fire may start while the previous one is still being delivered",
    "skip": "a fire due while the previous one is still being delivered is skipped",
    "buffer_one": "one fire waits while the previous one is delivered; more are skipped",
    "replace": "a new fire cancels the previous one still being delivered",
}
DST_GAP = {
    "shift": "a local time the clocks skip (spring forward) fires at the first valid time after",
    "skip": "a local time the clocks skip (spring forward) does not fire that day",
}
DST_REPEAT = {
    "first": "a local time that happens twice (fall back) fires once, the first time",
    "both": "a local time that happens twice (fall back) fires both times",
}


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    for unit, size in (("day", 86_400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}" + ("s" if n != 1 else "")
    return f"{seconds} s"


def policy_words(trigger: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(name, value, what it means) for each policy of a TriggerOut."""
    p = trigger.get("policies") or {}
    r = trigger.get("recurrence") or {}
    retry = p.get("retry") or {}
    misfire = str(p.get("misfire", "fire_once"))
    rows = [
        ("misfire", misfire, MISFIRE.get(misfire, "")),
        (
            "misfire_grace_s",
            str(p.get("misfire_grace_s", 60)),
            f"an instant at most {_duration(p.get('misfire_grace_s', 60))} late still fires on "
            "time; later, it is missed (the misfire policy decides)",
        ),
        (
            "horizon_s",
            str(p.get("horizon_s", 86_400)),
            f"missed instants older than {_duration(p.get('horizon_s', 86_400))} are expired, "
            "never fired",
        ),
        (
            "max_catchup",
            str(p.get("max_catchup", 10)),
            "the most missed instants fire_all fires after an outage",
        ),
        ("overlap", str(p.get("overlap", "allow")), OVERLAP.get(str(p.get("overlap")), "")),
        (
            "jitter_s",
            str(p.get("jitter_s", 0)),
            "each fire is delayed by a stable random amount up to this many seconds"
            if p.get("jitter_s")
            else "no jitter: fires are due at their instant",
        ),
        (
            "retry",
            f"{retry.get('max_attempts', 5)} attempts",
            f"a failed delivery is tried again up to {retry.get('max_attempts', 5)} attempts in "
            f"all, waits from {retry.get('base_s', 1.0)} s doubling up to {retry.get('max_s')} s",
        ),
        ("dst_gap", str(r.get("dst_gap", "shift")), DST_GAP.get(str(r.get("dst_gap")), "")),
        (
            "dst_repeat",
            str(r.get("dst_repeat", "first")),
            DST_REPEAT.get(str(r.get("dst_repeat")), ""),
        ),
    ]
    if retry.get("max_event_age_s") is not None:
        age = retry["max_event_age_s"]
        rows.append((
            "max_event_age_s", str(age),
            f"a fire more than {_duration(age)} old when it would be sent is not sent (expired), "
            "and no retry starts past that age",
        ))  # fmt: skip
    if retry.get("max_retry_duration_s") is not None:
        span = retry["max_retry_duration_s"]
        rows.append((
            "max_retry_duration_s", str(span),
            f"no retry starts more than {_duration(span)} after the first attempt",
        ))  # fmt: skip
    if p.get("action_after_completion") == "delete":
        rows.append((
            "action_after_completion", "delete",
            "once its last instant is decided (its count or end), the trigger is deleted",
        ))  # fmt: skip
    return rows


def about(seconds: float) -> str:
    """A duration rounded for reading: "about 30 s", "about 12 min", "about 3.5 h"."""
    return f"about {rounded(seconds)}"


def rounded(seconds: float) -> str:
    """A duration rounded for reading: "30 s", "12 min", "3.5 h", "2 days"."""
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    if seconds < 86_400:
        return f"{seconds / 3600:.1f} h".replace(".0 h", " h")
    return f"{seconds / 86_400:.1f} days".replace(".0 days", " days")


def backfill_cost(fires: int, dispatch_per_s: float) -> dict[str, Any]:
    """A backfill's cost in words: ``fires`` at the fastest the dispatcher sends them, the
    tenant grant's ``dispatch_per_s`` (a backfill order takes a token of it, and only when no
    on-time or catch-up work of the tenant can go: :mod:`horae.streams.dispatcher.admission`),
    so the time said is the least it takes; ``rate`` none when the grant leaves no rate (then
    no time is said)."""
    shown: dict[str, Any] = {
        "fires": f"{fires:,}",
        "rate": f"{dispatch_per_s:g}/s" if dispatch_per_s > 0 else None,
        "time": rounded(fires / dispatch_per_s) if dispatch_per_s > 0 and fires else None,
    }
    return shown
