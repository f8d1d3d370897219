"""One run of the APScheduler peer of bench/compare.py on its own database.

    python bench/peers/apscheduler_peer.py <sqlalchemy-url> <n> <rate> <cap-s> <held>

The same protocol as the Java peers (bench/peers/src/main/java/horae/bench/Peer.java): ``n``
one-shot jobs (a date trigger a day away) in its SQLAlchemyJobStore, plus ``held`` jobs a year
away, the first 1,000 of each added through APScheduler's API (``add_job``), the rest copies of
those rows (setup only); the scheduler starts (start-up time); the run
is armed by rewriting each job's row as the job store writes it (next run time and pickled state):
job ``i`` due at ``T + floor(i / rate)`` s, then the scheduler is woken. Jobs run in this
process's thread pool and record their lateness (start minus due time). The run ends when every
job ran once and the job store holds none of them, or after ``cap-s`` seconds (a timeout). The
last line printed is JSON.
"""

from __future__ import annotations

import json
import pickle
import resource
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import psycopg
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy import create_engine, text

WORKERS = 20
API_ROWS = 1000  # jobs added through add_job; the others are copies of those rows (setup only)
PROTOCOL = pickle.HIGHEST_PROTOCOL  # SQLAlchemyJobStore's default pickle_protocol
TUNING = (
    f"APScheduler 3.11.3, BackgroundScheduler, SQLAlchemyJobStore (SQLAlchemy 2.0, psycopg 3), "
    f"ThreadPoolExecutor(max_workers={WORKERS}), misfire_grace_time=None (no late run "
    f"skipped), coalesce=False"
)

_lock = threading.Lock()
_late_ms: dict[int, float] = {}
_state = {"base": 0.0, "rate": 1, "duplicates": 0}


def record(i: int) -> None:
    """The job: its lateness, once per index (a second run counts as a duplicate)."""
    now = time.time()
    with _lock:
        if i in _late_ms:
            _state["duplicates"] += 1
        else:
            _late_ms[i] = (now - (_state["base"] + i // _state["rate"])) * 1000


def _arm(url: str, base: float, rate: int) -> None:
    """Job ``i`` due at ``base + i // rate``: its row rewritten as the job store writes it (the
    pickled state and the next run time), through COPY into a temporary table and one UPDATE."""
    with psycopg.connect(url.replace("+psycopg", "")) as conn:
        rows = conn.execute(
            "select id, job_state from apscheduler_jobs where id like 't%'"
        ).fetchall()
        conn.execute("create temp table armed (id text, t float8, s bytea) on commit drop")
        with conn.cursor().copy("copy armed (id, t, s) from stdin") as copy:
            for job_id, blob in rows:
                state = pickle.loads(blob)
                due = base + int(job_id[1:]) // rate
                when = datetime.fromtimestamp(due, UTC)
                state["next_run_time"] = when
                state["trigger"].run_date = when
                copy.write_row((job_id, due, pickle.dumps(state, PROTOCOL)))
        conn.execute(
            "update apscheduler_jobs j set next_run_time = a.t, job_state = a.s"
            " from armed a where j.id = a.id"
        )


def _copy(url: str, prefix: str, start: int, stop: int) -> None:
    """Rows ``prefix + start .. prefix + (stop - 1)``: the API-written ``prefix + 0`` with its id
    and argument changed, as the job store pickles a job."""
    if stop <= start:
        return
    engine = create_engine(url)
    with engine.begin() as conn:
        t, blob = conn.execute(
            text("select next_run_time, job_state from apscheduler_jobs where id = :i"),
            {"i": f"{prefix}0"},
        ).one()
        state = pickle.loads(blob)
        insert = text(
            "insert into apscheduler_jobs (id, next_run_time, job_state) values (:i, :t, :s)"
        )
        for chunk in range(start, stop, 10_000):
            rows = []
            for i in range(chunk, min(stop, chunk + 10_000)):
                state["id"], state["args"] = f"{prefix}{i}", (i if prefix == "t" else -1,)
                rows.append({"i": state["id"], "t": t, "s": pickle.dumps(state, PROTOCOL)})
            conn.execute(insert, rows)
    engine.dispose()


def _pending(url: str) -> int:
    engine = create_engine(url)
    with engine.connect() as conn:
        n = conn.execute(text("select count(*) from apscheduler_jobs where id like 't%'")).scalar()
    engine.dispose()
    return int(n or 0)


def main() -> None:
    url, n, rate, cap_s, held = sys.argv[1], *map(int, sys.argv[2:6])
    _state["rate"] = rate
    print(f"apscheduler: {TUNING}", file=sys.stderr)
    started = time.monotonic()
    scheduler = BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(url=url)},
        executors={"default": ThreadPoolExecutor(max_workers=WORKERS)},
        job_defaults={"misfire_grace_time": None, "coalesce": False, "max_instances": 1},
        timezone=UTC,
    )
    scheduler.start(paused=True)  # creates the table; adds go straight to the store
    build_s = time.monotonic() - started
    far = datetime.now(UTC) + timedelta(days=1)
    inserted = time.monotonic()
    for i in range(min(n, API_ROWS)):
        scheduler.add_job(record, "date", run_date=far, args=(i,), id=f"t{i}")
    _copy(url, "t", API_ROWS, n)
    year = far + timedelta(days=365)
    for i in range(min(held, API_ROWS)):
        scheduler.add_job(record, "date", run_date=year, args=(-1,), id=f"h{i}")
    _copy(url, "h", API_ROWS, held)
    insert_s = time.monotonic() - inserted
    print(f"apscheduler: inserted {n} (+{held} held) in {insert_s:.1f} s", file=sys.stderr)
    resumed = time.monotonic()
    scheduler.resume()
    startup_s = build_s + time.monotonic() - resumed
    time.sleep(2)  # warm, as the Java peers
    arm_at = time.time()
    base = float(int(arm_at + 3 + n / 5000 + held / 100_000) + 1)  # as the Java peers
    _state["base"] = base
    _arm(url, base, rate)
    armed = time.time()
    arm_ms = (armed - arm_at) * 1000
    scheduler.wakeup()
    cpu0 = time.process_time()
    timeout = False
    while True:
        time.sleep(0.02)
        now = time.time()
        if now - base > cap_s:
            timeout, end = True, now
            break
        if len(_late_ms) >= n and _pending(url) == 0:
            end = time.time()
            break
    cpu = time.process_time() - cpu0
    with _lock:
        late = sorted(_late_ms.values())
    scheduler.shutdown(wait=False)
    done = len(late)

    def q(p: float) -> int:
        return round(late[min(done - 1, int(p * (done - 1)))]) if done else -1

    span = max(0.001, end - base)
    print(
        json.dumps(
            {
                "system": "apscheduler",
                "n": n,
                "executed": done,
                "duplicates": _state["duplicates"],
                "timeout": timeout,
                "fires_per_s": round(done / span, 1),
                "p50_ms": q(0.5),
                "p99_ms": q(0.99),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "cpu_s_per_1k": round(cpu / done * 1000, 3) if done else 0.0,
                "startup_s": round(startup_s, 3),
                "insert_s": round(insert_s, 1),
                "arm_ms": round(arm_ms),
                "armed_before_due": armed < base,
                "span_s": round(span, 2),
                "tuning": TUNING,
                "quantiles_ms": [q(p / 100) for p in range(101)],
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
