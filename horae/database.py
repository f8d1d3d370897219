"""The PostgreSQL side of a connection: the TLS every role's URL carries.

:func:`with_tls` adds the settings' ``database_sslmode`` (libpq ``sslmode``) and
``database_ssl_ca_file`` (``sslrootcert``) to a URL, so every connection a process makes (the
owner's, the projector's, the reader's, the API's) is made the same way; a URL that names its own
keeps them when the settings leave them unset.
"""

from __future__ import annotations

from pathlib import Path

from psycopg.conninfo import make_conninfo


def with_tls(url: str, sslmode: str | None, ca_file: Path | None) -> str:
    """``url`` with ``sslmode`` and ``sslrootcert=ca_file`` set (those given); an empty URL
    stays empty (no database configured)."""
    if not url or (sslmode is None and ca_file is None):
        return url
    params: dict[str, str] = {}
    if sslmode is not None:
        params["sslmode"] = sslmode
    if ca_file is not None:
        params["sslrootcert"] = str(ca_file)
    return make_conninfo(url, **params)
