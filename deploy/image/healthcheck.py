"""The image's health probe: asks the running Horae process its own probe, from inside its
container (the HEALTHCHECK, and the chart's exec probes).

Which process runs is read from PID 1's command line (``horae <command> [flags]``), unless the
first argument names it. Then:

- ``api``: ``GET /readyz`` (Kafka and PostgreSQL answer) on ``--port`` / ``HORAE_API_PORT``
  (default 8089); with ``--live``, ``GET /healthz`` (the process serves).
- ``planner``, ``dispatcher``, ``projector``: ``GET /metrics`` on ``--metrics-port`` /
  ``HORAE_<PROCESS>_METRICS_PORT``, at ``--metrics-host`` / ``HORAE_<PROCESS>_METRICS_HOST``
  (loopback when unset or a wildcard) (the process serves its registry; a hung loop ends the
  process by itself, status 70). Without a metrics port, healthy while the process runs.
- anything else (``migrate``, ``topics apply``, a one-shot command): healthy while it runs.

Exit 0 when healthy, 1 otherwise (one line on stdout says why), as HEALTHCHECK and Kubernetes
exec probes expect. Standard library only: the final image has no curl.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

WORKERS = ("planner", "dispatcher", "projector")
TIMEOUT_S = 4.0


def _command_line() -> list[str]:
    try:
        with open("/proc/1/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return []
    args = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    for i, arg in enumerate(args):  # .../venv/bin/horae COMMAND ..., or python -m horae.cli.main
        if arg.endswith("/horae") or arg == "horae" or arg == "horae.cli.main":
            return args[i + 1 :]
    return args[1:]


def _flag(args: list[str], name: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _get(url: str) -> tuple[bool, str]:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
            return answer.status == 200, f"{url}: {answer.status}"
    except urllib.error.HTTPError as exc:
        return False, f"{url}: {exc.code} {exc.read(300).decode(errors='replace')}"
    except OSError as exc:
        return False, f"{url}: {exc}"


def _reachable(host: str | None) -> str:
    """Where to ask a server listening on ``host``: loopback for a wildcard (or unset)."""
    if not host or host == "0.0.0.0":
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def probe(argv: list[str]) -> tuple[bool, str]:
    live = "--live" in argv
    named = [a for a in argv if not a.startswith("--")]
    args = _command_line()
    command = named[0] if named else (args[0] if args else "")
    if command == "api":
        port = _flag(args, "--port") or os.environ.get("HORAE_API_PORT") or "8089"
        return _get(f"http://127.0.0.1:{port}/{'healthz' if live else 'readyz'}")
    if command in WORKERS:
        env = f"HORAE_{command.upper()}_METRICS_PORT"
        port = _flag(args, "--metrics-port") or os.environ.get(env) or "0"
        if port == "0":
            return True, f"{command}: running ({env} unset: no endpoint to ask)"
        host = _flag(args, "--metrics-host") or os.environ.get(
            f"HORAE_{command.upper()}_METRICS_HOST"
        )
        return _get(f"http://{_reachable(host)}:{port}/metrics")
    return True, f"{command or 'process'}: running"


def main() -> int:
    ok, why = probe(sys.argv[1:])
    print(("healthy: " if ok else "unhealthy: ") + why)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
