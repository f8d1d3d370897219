"""Zone loading and the tzdata version actually in use.

This is the one place of :mod:`horae.domain` that touches the file system, and only to *identify*
the time-zone database: :mod:`zoneinfo` looks a key up in each directory of ``zoneinfo.TZPATH``
(on Debian ``/usr/share/zoneinfo``) and only falls back to the ``tzdata`` Python package when no
directory has the zone. :func:`tzdata_version` mirrors that lookup and reads the version from the
source that serves the zone:

- a system directory: the first line of its ``tzdata.zi`` (``# version 2025b``), else ``+VERSION``;
- the ``tzdata`` package: its ``IANA_VERSION`` constant.

Results are computed once per source and cached for the life of the process (tzdata does not
change under a running process: zoneinfo caches zones too). Planner and API hosts should ship the
same tzdata; the version travels with every computed instant so a difference is visible.
"""

from __future__ import annotations

import functools
import os.path
import zoneinfo

from horae.domain.errors import ValidationError

UNKNOWN_VERSION = "unknown"


@functools.lru_cache(maxsize=4096)
def load_zone(key: str, field: str = "zone") -> zoneinfo.ZoneInfo:
    """The :class:`zoneinfo.ZoneInfo` for IANA ``key``; :class:`ValidationError` if unknown."""
    if not isinstance(key, str) or not key or key != key.strip():
        raise ValidationError(field, key, "time zone must be a non-empty IANA name")
    if key.startswith(("/", ".")) or ".." in key or key.lower() == "localtime":
        raise ValidationError(field, key, "unknown time zone")
    try:
        return zoneinfo.ZoneInfo(key)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ValidationError(field, key, "unknown time zone") from None


def _dir_version(directory: str) -> str:
    for name, prefix in (("tzdata.zi", "# version "), ("+VERSION", "")):
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="ascii", errors="replace") as handle:
                first = handle.readline().strip()
        except OSError:
            continue
        if first.startswith(prefix) and first[len(prefix) :].strip():
            return first[len(prefix) :].strip()
    return UNKNOWN_VERSION


@functools.cache
def _package_version() -> str:
    try:
        import tzdata  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return UNKNOWN_VERSION
    version = getattr(tzdata, "IANA_VERSION", None)
    return str(version) if version else UNKNOWN_VERSION


@functools.cache
def _source_version(directory: str | None) -> str:
    return _package_version() if directory is None else _dir_version(directory)


@functools.lru_cache(maxsize=4096)
def zone_source(key: str = "UTC") -> str | None:
    """The TZPATH directory serving ``key``, or ``None`` for the ``tzdata`` package."""
    for directory in zoneinfo.TZPATH:
        if os.path.isfile(os.path.join(directory, key)):
            return directory
    return None


def tzdata_version(key: str = "UTC") -> str:
    """The IANA tzdata release (``"2025b"``) that :mod:`zoneinfo` uses for zone ``key``."""
    return _source_version(zone_source(key))
