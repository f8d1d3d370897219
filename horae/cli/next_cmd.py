"""``horae next``: the next instants of an expression, computed by the planner's own functions.

Usage::

    horae next EXPR [--zone Z] [--after T] [--count N] [--local] [--dst-gap shift|skip]
                    [--dst-repeat first|both]
    horae next --jsonl < requests.jsonl

EXPR is any expression of :func:`horae.domain.parse_expression`: cron (5 or 6 fields, macros),
``@every 90s [from T]`` or ``@at T[,T...]``. Instants print one per line as RFC 3339 UTC
(``2026-03-08T07:00:00Z``); ``--local`` appends the local wall time with its offset, the tzdata
release and any DST note. ``--after`` (default: now) takes RFC 3339; without an offset it is a
wall time in ``--zone``. Every flag has an environment fallback (the ``next`` section of the
settings): ``HORAE_NEXT_ZONE``, ``HORAE_NEXT_AFTER``, ``HORAE_NEXT_COUNT``, ``HORAE_NEXT_LOCAL``,
``HORAE_NEXT_DST_GAP``, ``HORAE_NEXT_DST_REPEAT``, ``HORAE_NEXT_JSONL``.

``--jsonl`` reads one JSON object per stdin line, ``{"expr": ..., "zone": ..., "after": ...,
"count": N}`` (all but ``expr`` optional, defaulting to the flags; also ``dst_gap``,
``dst_repeat``), and writes exactly one line per input line, in order: ``{"instants": [...],
"tzdata": ...}`` (plus ``"local"`` with ``--local``) or ``{"error": "..."}``. A bad line never
stops the batch; the exit code is 0 unless stdin itself cannot be read.

Errors print one precise line on stderr and exit with code 2. Requests are validated as the API
validates a definition's recurrence: the text rules of ``recurrence.expr`` and ``recurrence.zone``
(:mod:`horae.contracts.textrules`) and the platform limits, ``HORAE_MIN_INTERVAL_S`` included.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

from horae.cli.common import add_flags
from horae.contracts.textrules import DEFINITION_RULES, quoted, text_problem
from horae.domain import (
    DstPolicy,
    Limits,
    TriggerSpec,
    ValidationError,
    next_instants,
    occurrences,
    parse_expression,
    parse_instant,
    to_epoch,
    validate_trigger,
)
from horae.domain.dst import GapPolicy, RepeatPolicy, enum_value
from horae.domain.tzdb import load_zone
from horae.settings import NextSettings, Settings

MAX_COUNT = 1000


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "next",
        help="print the next instants of a cron/@every/@at expression",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="Expressions: '0 9 * * MON-FRI', '@daily', '@every 5m', '@at 2026-03-08T07:00:00Z'.",
    )
    parser.add_argument(
        "expr",
        nargs="?",
        metavar="EXPR",
        help="cron (Vixie; L, LW, 15W, FRI#3, FRIL too), @every or @at expression",
    )
    add_flags(parser, "next")
    parser.set_defaults(func=run)


def _count(value: Any, field: str = "count") -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        raise ValidationError(field, value, f"must be an integer 1..{MAX_COUNT}")
    return value


def _after(text: Any, zone: str, now: int) -> int:
    if text is None:
        return now
    if not isinstance(text, str):
        raise ValidationError("after", text, "expected an RFC 3339 timestamp")
    try:
        return parse_instant(text, "after")
    except ValidationError as exc:
        if "UTC offset" not in exc.message:
            raise
    wall = datetime.fromisoformat(text.strip()).replace(tzinfo=load_zone(zone))
    return to_epoch(wall, "after")


def compute(
    expr: Any,
    zone: Any,
    after: Any,
    count: Any,
    dst_gap: Any,
    dst_repeat: Any,
    now: int,
    limits: Limits | None = None,
) -> tuple[list[int], TriggerSpec]:
    """Validate a request exactly as the API does (``limits``: the platform's, from the
    settings) and return its next instants."""
    if not isinstance(expr, str) or not expr.strip():
        raise ValidationError("expr", expr, "an expression is required")
    if not isinstance(zone, str):
        raise ValidationError("zone", zone, "time zone must be a string")
    for field, value in (("expr", expr), ("zone", zone)):
        problem = text_problem(value, DEFINITION_RULES[f"recurrence.{field}"])
        if problem is not None:
            raise ValidationError(field, quoted(value), problem)
    dst = DstPolicy(
        enum_value(GapPolicy, dst_gap, "dst_gap"),
        enum_value(RepeatPolicy, dst_repeat, "dst_repeat"),
    )
    spec = TriggerSpec(parse_expression(expr), zone, dst)
    start = _after(after, zone, now)
    how_many = _count(count)
    validate_trigger(spec, start, limits or Limits())
    return next_instants(spec.schedule(), start, how_many), spec


def _lines(instants: list[int], spec: TriggerSpec, local: bool) -> list[str]:
    schedule = spec.schedule()
    out = []
    for occ in occurrences(schedule, instants):
        if not local:
            out.append(occ.utc_text)
            continue
        note = f" ({occ.dst})" if occ.dst else ""
        out.append(f"{occ.utc_text} {occ.local_text} {spec.zone} tzdata={occ.tzdata}{note}")
    return out


def _now() -> int:
    return to_epoch(datetime.now(UTC))


def _one_json(line: str, opts: NextSettings, now: int, limits: Limits) -> dict[str, Any]:
    try:
        request = json.loads(line)
    except json.JSONDecodeError as exc:
        return {"error": f"invalid JSON: {exc.msg} at column {exc.colno}"}
    if not isinstance(request, dict):
        return {"error": "each line must be a JSON object"}
    unknown = sorted(set(request) - {"expr", "zone", "after", "count", "dst_gap", "dst_repeat"})
    if unknown:
        return {"error": f"{unknown[0]}: unknown field"}
    try:
        instants, spec = compute(
            request.get("expr"),
            request.get("zone", opts.zone),
            request.get("after", opts.after),
            request.get("count", opts.count),
            request.get("dst_gap", opts.dst_gap),
            request.get("dst_repeat", opts.dst_repeat),
            now,
            limits,
        )
    except ValidationError as exc:
        return {"error": str(exc)}
    result: dict[str, Any] = {
        "instants": [occ.utc_text for occ in occurrences(spec.schedule(), instants)],
        "tzdata": spec.schedule().tzdata,
    }
    if opts.local:
        result["local"] = [occ.to_dict() for occ in occurrences(spec.schedule(), instants)]
    return result


def _run_jsonl(opts: NextSettings, args: argparse.Namespace, limits: Limits) -> int:
    if args.expr:
        print("horae next: error: EXPR cannot be combined with --jsonl", file=sys.stderr)
        return 2
    now = _now()
    for line in sys.stdin:
        if not line.strip():
            result: dict[str, Any] = {"error": "empty line"}
        else:
            try:
                result = _one_json(line, opts, now, limits)
            except Exception as exc:  # a bad line must never stop the batch
                result = {"error": f"internal error: {type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(result, separators=(",", ":")) + "\n")
        sys.stdout.flush()
    return 0


def run(settings: Settings, args: argparse.Namespace) -> int:
    opts = settings.next
    limits = Limits(min_interval_s=settings.min_interval_s)  # as the API's
    if opts.jsonl:
        return _run_jsonl(opts, args, limits)
    if not args.expr:
        print("horae next: error: EXPR is required (or use --jsonl)", file=sys.stderr)
        return 2
    try:
        instants, spec = compute(
            args.expr, opts.zone, opts.after, opts.count, opts.dst_gap, opts.dst_repeat, _now(),
            limits,
        )  # fmt: skip
    except ValidationError as exc:
        print(f"horae next: error: {exc}", file=sys.stderr)
        return 2
    for line in _lines(instants, spec, opts.local):
        print(line)
    return 0
