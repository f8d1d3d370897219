"""One run of the APScheduler peer of bench/compare.py on its own database.

    python bench/peers/apscheduler_peer.py <sqlalchemy-url> <n> <rate> <cap-s> <held>
        <receiver-url> <secret-base64> workers=<N>

The protocol of the Java peers (bench/peers/src/main/java/horae/bench/Peer.java): ``held`` jobs a
year away (the first 1,000 through ``add_job``, the rest copies of those rows as the job store
pickles them), ``VACUUM ANALYZE``; the scheduler starts (start-up time); a warm-up burst of
``WARM`` jobs due at once, delivered to the receiver's ``/warm``; then the ``n`` measured jobs
written at their final due time (job ``i`` due at ``T + floor(i / rate)`` s, the first 1,000
through ``add_job``, the rest copies), ``VACUUM ANALYZE``, and the scheduler is woken. Each job
POSTs its key, signed (Standard Webhooks, as bench/receiver.py checks), through one pooled
keep-alive ``httpx.Client`` shared by the worker threads, and returns only after the 2xx. The
run ends when every job was delivered once and the job store holds none of them, or ``cap-s``
seconds after T (a timeout). The last line printed is JSON.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import pickle
import resource
import sys
import threading
import time
from datetime import UTC, datetime

import httpx
import psycopg
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy import create_engine, text

API_ROWS = 1000  # jobs added through add_job; the others are copies of those rows (setup only)
WARM = 200
PROTOCOL = pickle.HIGHEST_PROTOCOL  # SQLAlchemyJobStore's default pickle_protocol


def tuning(workers: int) -> str:
    return (
        f"APScheduler 3.11.3, BackgroundScheduler, SQLAlchemyJobStore (SQLAlchemy 2.0, psycopg 3), "
        f"ThreadPoolExecutor(max_workers={workers}), misfire_grace_time=None (no late run "
        f"skipped), coalesce=False; handler: signed POST via one httpx.Client (pooled, "
        f"keep-alive, max_connections={workers}), returns after the 2xx"
    )


class Run:
    """The run's state: the receiver client, each measured job's first delivery."""

    def __init__(self, url: str, secret_b64: str, workers: int) -> None:
        self.hook = url
        self.warm_url = url.rsplit("/", 1)[0] + "/warm"
        self.key = base64.b64decode(secret_b64)
        limits = httpx.Limits(max_connections=workers, max_keepalive_connections=workers)
        self.client = httpx.Client(limits=limits, timeout=30)
        self.lock = threading.Lock()
        self.late_ms: dict[int, float] = {}
        self.duplicates = 0
        self.warmed = 0
        self.base = 0.0
        self.rate = 1

    def post(self, job_id: str, due_ms: float, url: str) -> None:
        body = json.dumps({"key": job_id, "due_ms": due_ms}).encode()
        msg_id, ts = f"apscheduler:{job_id}", int(time.time())
        mac = hmac.new(self.key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
        headers = {
            "Content-Type": "application/json",
            "Idempotency-Key": msg_id,
            "webhook-id": msg_id,
            "webhook-timestamp": str(ts),
            "webhook-signature": "v1," + base64.b64encode(mac).decode(),
        }
        self.client.post(url, content=body, headers=headers).raise_for_status()

    def deliver(self, job_id: str) -> None:
        """The job: its signed POST, then its delivery recorded (a second one: a duplicate)."""
        if job_id[0] == "w":
            self.post(job_id, time.time() * 1000, self.warm_url)
            with self.lock:
                self.warmed += 1
            return
        i = int(job_id[1:])
        due = self.base + i // self.rate
        self.post(job_id, due * 1000, self.hook)
        now = time.time()
        with self.lock:
            if i in self.late_ms:
                self.duplicates += 1
            else:
                self.late_ms[i] = (now - due) * 1000


RUN: Run | None = None


def deliver(job_id: str) -> None:
    """The job function (module-level: the job store pickles a reference to it)."""
    assert RUN is not None
    RUN.deliver(job_id)


def _copy(url: str, prefix: str, start: int, stop: int, base: float, rate: int) -> None:
    """Rows ``prefix + start .. prefix + (stop - 1)``, row ``j`` due at ``base + j // rate``: the
    API-written ``prefix + 0`` with its id, argument and due time changed, as the job store
    pickles a job."""
    if stop <= start:
        return
    engine = create_engine(url)
    with engine.begin() as conn:
        blob = conn.execute(
            text("select job_state from apscheduler_jobs where id = :i"), {"i": f"{prefix}0"}
        ).scalar_one()
        state = pickle.loads(blob)
        insert = text(
            "insert into apscheduler_jobs (id, next_run_time, job_state) values (:i, :t, :s)"
        )
        for chunk in range(start, stop, 10_000):
            rows = []
            for j in range(chunk, min(stop, chunk + 10_000)):
                due = base + j // rate
                when = datetime.fromtimestamp(due, UTC)
                state["id"], state["args"] = f"{prefix}{j}", (f"{prefix}{j}",)
                state["next_run_time"] = when
                state["trigger"].run_date = when
                rows.append({"i": state["id"], "t": due, "s": pickle.dumps(state, PROTOCOL)})
            conn.execute(insert, rows)
    engine.dispose()


def _write(
    scheduler: BackgroundScheduler, url: str, prefix: str, n: int, base: float, rate: int
) -> None:
    for j in range(min(n, API_ROWS)):
        when = datetime.fromtimestamp(base + j // rate, UTC)
        scheduler.add_job(deliver, "date", run_date=when, args=(f"{prefix}{j}",), id=f"{prefix}{j}")
    _copy(url, prefix, API_ROWS, n, base, rate)
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("vacuum analyze")


def _pending(url: str, prefix: str) -> int:
    engine = create_engine(url)
    with engine.connect() as conn:
        n = conn.execute(
            text("select count(*) from apscheduler_jobs where id like :p"), {"p": f"{prefix}%"}
        ).scalar()
    engine.dispose()
    return int(n or 0)


def main() -> None:
    global RUN
    url, n, rate, cap_s, held = sys.argv[1], *map(int, sys.argv[2:6])
    receiver, secret = sys.argv[6], sys.argv[7]
    settings = dict(arg.split("=", 1) for arg in sys.argv[8:])
    workers = int(settings["workers"])
    RUN = run = Run(receiver, secret, workers)
    run.rate = rate
    print(f"apscheduler: {tuning(workers)}", file=sys.stderr)
    scheduler = BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(url=url)},
        executors={"default": ThreadPoolExecutor(max_workers=workers)},
        job_defaults={"misfire_grace_time": None, "coalesce": False, "max_instances": 1},
        timezone=UTC,
    )
    started = time.monotonic()
    scheduler.start(paused=True)  # creates the table; adds go straight to the store
    build_s = time.monotonic() - started
    if held:
        year = time.time() + 366 * 86400
        _write(scheduler, url, "h", held, year, 2**31)
    resumed = time.monotonic()
    scheduler.resume()
    startup_s = build_s + time.monotonic() - resumed
    now = datetime.now(UTC)
    warm_at = time.monotonic()
    for j in range(WARM):
        scheduler.add_job(deliver, "date", run_date=now, args=(f"w{j}",), id=f"w{j}")
    warm_write_s = time.monotonic() - warm_at
    deadline = time.monotonic() + 120
    while (run.warmed < WARM or _pending(url, "w")) and time.monotonic() < deadline:
        time.sleep(0.05)
    written_at = time.time()
    # a whole second far enough ahead for the writes: 3 s, six times the warm-up's API writes
    # (200 jobs; the measured run adds 1,000 through the API) and 0.2 ms per copied row
    run.base = base = float(int(written_at + 3 + 6 * warm_write_s + n / 5000) + 1)
    _write(scheduler, url, "t", n, base, rate)
    insert_s = time.time() - written_at
    written_before_due = time.time() < base
    scheduler.wakeup()
    print(f"apscheduler: wrote {n} (+{held} held) in {insert_s:.1f} s", file=sys.stderr)
    while time.time() < base:
        time.sleep(0.001)
    cpu0 = time.process_time()
    timeout = False
    while True:
        time.sleep(0.02)
        now_s = time.time()
        if now_s - base > cap_s:
            timeout, end = True, now_s
            break
        if len(run.late_ms) >= n and _pending(url, "t") == 0:
            end = time.time()
            break
    cpu = time.process_time() - cpu0
    with run.lock:
        late = sorted(run.late_ms.values())
    scheduler.shutdown(wait=False)
    done = len(late)
    span = max(0.001, end - base)
    print(
        json.dumps(
            {
                "system": "apscheduler",
                "n": n,
                "delivered": done,
                "duplicates": run.duplicates,
                "timeout": timeout,
                "completed_per_s": round(done / span, 1),
                "completed_p99_ms": round(late[int(0.99 * (done - 1))]) if done else -1,
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "cpu_s_per_1k": round(cpu / done * 1000, 3) if done else 0.0,
                "startup_s": round(startup_s, 3),
                "insert_s": round(insert_s, 1),
                "written_before_due": written_before_due,
                "due_base_ms": int(base * 1000),
                "warmed": run.warmed,
                "tuning": tuning(workers),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
