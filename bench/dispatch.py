"""Bench: the whole dispatcher (lanes on the real broker → signed POSTs → attempts/outcomes
committed in Kafka transactions) against a local keep-alive receiver in a subprocess.

1. Throughput: ``--fires`` orders already due wait on ``lane.on_time`` (12 partitions, many
   triggers); a dispatcher subprocess (``horae dispatcher``) starts; POSTs/s = distinct keys the
   receiver saw / time from its first to its last receipt.
2. Lateness at ``--rate`` fires/s: orders are produced each at its instant (steady, in 5 ms
   steps) for ``--seconds``; delivery lateness = receipt at the receiver − the fire's instant
   (its ``scheduled_at`` = ``due_at`` = ``not_before``), p50/p99 over all fires. This includes
   produce → consume latency through the broker; the planner's own commit is not part of it.
``--phase throughput|lateness`` runs one of them; ``--procs N`` runs N dispatcher processes
sharing the lanes as one consumer group (slots ``t0``…; CPU per POST is theirs summed).
3. ``--profile``: phase 1 again with the dispatcher in this process under cProfile (both its
   threads), printing where the time goes.
4. The HTTP ceiling, in the same run: the dispatcher's own HTTP client (the lean sender, on the
   dispatcher's event loop, at its concurrency) POSTing ``--fires`` requests built and signed
   beforehand to the same receiver from a process of its own, with no Kafka
   (``ceiling_posts_per_s``; ``ratio_ceiling`` = phase 1's POSTs/s over it, goal >= 0.6).

Needs a broker: ``HORAE_KAFKA_BOOTSTRAP`` (default the dev stack, 127.0.0.1:19092). The last line
printed is JSON: ``{"posts_per_s": ..., "ceiling_posts_per_s": ..., "ratio_ceiling": ...,
"delivery_p99_ms": ..., "calibration_s": ..., ...}``.

    .venv/bin/python bench/dispatch.py [--fires 20000] [--rate 2000] [--seconds 15] [--procs 1]
        [--phase all|throughput|ceiling|lateness] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from aiohttp import web
from confluent_kafka import Producer
from machine import calibrate

from horae.contracts import events as ev
from horae.contracts.codec import encode
from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, fire_partition, topic_name
from horae.delivery.envelope import webhook_body
from horae.domain.keys import FireKey
from horae.kafka.admin import Plan, admin_client, apply, delete_under
from horae.kafka.config import client_config
from horae.outbound import AddressPolicy, SenderConfig, SendResult, SigningKeys, attempt_headers
from horae.settings import get_settings
from horae.streams.dispatcher.worker import loop_factory, make_sender

PARTITIONS = 12
TRIGGERS = 200
TENANT = "bench"
#: the dispatchers' sends in flight here (HORAE_DISPATCHER_MAX_INFLIGHT), and the ceiling's
INFLIGHT = 256
SECRET = "whsec_" + base64.b64encode(b"bench-secret-0123456789").decode()


# --- the receiver (subprocess) -----------------------------------------------------------------
def serve(port: int = 0) -> None:
    """Receiver on ``port`` (0: any free one): 200 to every POST; remembers (key, receipt,
    due_ms); GET /stats sums up (``shift_ms`` is added to each receipt: a virtual clock's offset);
    prints its port; stops when stdin closes."""
    seen: dict[str, tuple[float, int]] = {}
    total = [0]

    async def hook(request: web.Request) -> web.Response:
        body = await request.read()
        now = time.time()
        total[0] += 1
        key = request.headers.get("Idempotency-Key", "")
        if key not in seen:
            seen[key] = (now, json.loads(body)["data"]["payload"]["due_ms"])  # the envelope
        return web.Response(text="ok")

    async def stats(request: web.Request) -> web.Response:
        since = float(request.query.get("since", "0"))
        shift = float(request.query.get("shift_ms", "0"))
        rows = [(t, due) for t, due in seen.values() if t >= since]
        times = sorted(t for t, _ in rows)
        late = sorted(max(0.0, t * 1000 + shift - due) for t, due in rows)
        out: dict[str, float] = {"distinct": len(seen), "posts": total[0], "window": len(rows)}
        if len(times) > 1:
            out["first"], out["last"] = times[0], times[-1]
        if late:
            out["p50_ms"] = late[len(late) // 2]
            out["p99_ms"] = late[min(len(late) - 1, int(len(late) * 0.99))]
            out["max_ms"] = late[-1]
        return web.json_response(out)

    async def run() -> None:
        app = web.Application()
        app.router.add_post("/hook", hook)
        app.router.add_get("/stats", stats)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, backlog=2048).start()
        print(runner.addresses[0][1], flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await runner.cleanup()

    asyncio.run(run())


def stats(port: int, since: float = 0.0, shift_ms: float = 0.0) -> dict[str, float]:
    url = f"http://127.0.0.1:{port}/stats?since={since}&shift_ms={shift_ms}"
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())  # type: ignore[no-any-return]


# --- orders ----------------------------------------------------------------------------------
def make_order(url: str, trigger: str, instant_ms: int, seq: int) -> ev.DispatchOrder:
    key = FireKey(TENANT, trigger, instant_ms // 1000, seq)
    at = datetime.fromtimestamp(instant_ms / 1000, UTC)
    fire = ev.FireRecord(
        fire_key=key.canonical(),
        key_hash=key.short_hash(),
        tenant=TENANT,
        trigger_id=trigger,
        origin=ev.Origin.SCHEDULED,
        scheduled_at=at,
        sequence=seq,
        jitter_ms=0,
        due_at=at,
        decided_at=at,
        state=ev.FireState.FIRED,
        trigger_version=1,
        tzdata_version="bench",
        target_kind=ev.TargetKind.WEBHOOK,
        lane=ev.Lane.ON_TIME,
    )
    return ev.DispatchOrder(
        fire=fire,
        target=ev.Target(kind=ev.TargetKind.WEBHOOK, url=url, secret_refs=("bench",)),
        lane=ev.Lane.ON_TIME,
        attempt=1,
        not_before=at,
        payload=json.dumps({"due_ms": instant_ms, "trigger": trigger}).encode(),
    )


class Lanes:
    def __init__(self, bootstrap: str, prefix: str) -> None:
        self.topic = topic_name(Topic.LANE_ON_TIME, prefix)
        self.producer = Producer(client_config(bootstrap, {**PRODUCER_DEFAULTS, "linger.ms": 1}))
        self.parts = {f"g{i}": fire_partition(TENANT, f"g{i}", PARTITIONS) for i in range(TRIGGERS)}

    def put(self, o: ev.DispatchOrder) -> None:
        while True:
            try:
                self.producer.produce(
                    self.topic,
                    key=o.fire.fire_key.encode(),
                    value=encode(o),
                    partition=self.parts[o.fire.trigger_id],
                )
                break
            except BufferError:
                self.producer.poll(0.01)
        self.producer.poll(0)

    def flush(self) -> None:
        assert self.producer.flush(60) == 0


def env_for(bootstrap: str, prefix: str, slot: str, inflight: int = INFLIGHT) -> dict[str, str]:
    return dict(
        os.environ,
        HORAE_KAFKA_BOOTSTRAP=bootstrap,
        HORAE_TOPIC_PREFIX=prefix,
        HORAE_TOPIC_PARTITIONS=str(PARTITIONS),
        HORAE_DISPATCHER_ALLOW='["127.0.0.1/32"]',
        HORAE_DISPATCHER_WEBHOOK_SECRETS=json.dumps({TENANT: {"bench": SECRET}}),
        HORAE_TENANT_GRANTS=json.dumps(
            {TENANT: {"dispatch_per_s": 1_000_000, "max_concurrency": 256}}
        ),
        HORAE_DISPATCHER_MAX_INFLIGHT=str(inflight),
        HORAE_DISPATCHER_CALLBACK_SECRET="bench",
        HORAE_DISPATCHER_SLOT=slot,
        HORAE_LOG_LEVEL="WARNING",
    )


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def topics(bootstrap: str, prefix: str) -> None:
    replicas = get_settings().topic_replication_factor or 1  # 3: compare.py's replicated row
    apply(admin_client(bootstrap), Plan(prefix, PARTITIONS, replicas, tenants=(TENANT,)))


def wait_distinct(port: int, n: float, limit_s: float = 600) -> None:
    deadline = time.monotonic() + limit_s
    while stats(port)["distinct"] < n and time.monotonic() < deadline:
        time.sleep(0.25)


Procs = list[subprocess.Popen[bytes]]


def dispatchers(bootstrap: str, prefix: str, slot: str, procs: int) -> Procs:
    """``procs`` dispatcher processes sharing the lanes as one consumer group (slots
    ``<slot>0`` …)."""
    return [
        subprocess.Popen(
            [sys.executable, "-m", "horae.cli.main", "dispatcher"],
            env=env_for(bootstrap, prefix, f"{slot}{i}"),
        )
        for i in range(procs)
    ]


def stop_all(procs: Procs) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait(120)


@contextmanager
def throwaway_prefix(bootstrap: str) -> Iterator[str]:
    """A new topic prefix with the dispatcher's topics, deleted when the block ends."""
    prefix = f"bench{uuid.uuid4().hex[:8]}."
    topics(bootstrap, prefix)
    try:
        yield prefix
    finally:
        delete_under(bootstrap, prefix)


def throughput(
    bootstrap: str, port: int, fires: int, profile: bool, procs: int = 1
) -> dict[str, float]:
    with throwaway_prefix(bootstrap) as prefix:
        lanes = Lanes(bootstrap, prefix)
        url = f"http://127.0.0.1:{port}/hook"
        base_ms = int(time.time() * 1000) - 60_000
        for i in range(fires):
            lanes.put(make_order(url, f"g{i % TRIGGERS}", base_ms, i))
        lanes.flush()
        before = stats(port)["distinct"]
        if profile:
            return profiled(bootstrap, prefix, port, before + fires)
        started = time.time()
        running = dispatchers(bootstrap, prefix, "t", procs)
        try:
            wait_distinct(port, before + fires)
            s = stats(port, since=started)
            cpu = sum(cpu_s(proc.pid) for proc in running)
        finally:
            stop_all(running)
        span = s["last"] - s["first"]
        return {
            "posts_per_s": round(s["window"] / span, 1),
            "fires": s["window"],
            "span_s": round(span, 2),
            "dispatcher_cpu_ms_per_post": round(cpu * 1000 / s["window"], 3),
            "procs": procs,
        }


def ceiling(port: int, fires: int, concurrency: int = INFLIGHT) -> dict[str, float]:
    """The HTTP ceiling (phase 4), from a process of its own."""
    command = [sys.executable, __file__, "--ceiling-run", "--port", str(port)]
    command += ["--fires", str(fires), "--concurrency", str(concurrency)]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"the HTTP ceiling failed:\n{run.stderr}")
    return dict(json.loads(run.stdout.strip().splitlines()[-1]))


def ceiling_run(port: int, fires: int, concurrency: int) -> None:
    """``fires`` pre-built signed POSTs through the dispatcher's sender, ``concurrency`` at once;
    prints ``{"ceiling_posts_per_s": ..., "ceiling_cpu_ms_per_post": ...}``."""
    settings = get_settings().dispatcher
    url = f"http://127.0.0.1:{port}/hook"
    keys = SigningKeys.from_secrets(SECRET)
    now = time.time()
    requests = []
    for i in range(fires):  # the bodies the dispatcher sends for the same orders
        order = make_order(url, f"ceiling{i % TRIGGERS}", int(now * 1000), i)
        body, _ = webhook_body(order)
        headers = attempt_headers(body=body, fire_key=order.fire.fire_key, keys=keys, now=now)
        requests.append((body, headers))
    policy = AddressPolicy(allow=["127.0.0.1/32"])
    config = SenderConfig(pool_size=concurrency, pool_per_host=concurrency)

    async def run() -> float:
        sender = make_sender(settings.http_client, policy, config, time.time)
        await sender.start()
        todo = iter(requests)

        async def worker() -> None:
            for payload, headers in todo:
                result = await sender.send(url, payload, headers)
                if result.send_result is not SendResult.OK:
                    raise RuntimeError(f"a ceiling request failed: {result}")

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        took = time.perf_counter() - started
        await sender.close()
        return took

    cpu = time.process_time()
    with asyncio.Runner(loop_factory=loop_factory(settings.event_loop)) as runner:
        took = runner.run(run())
    cpu = time.process_time() - cpu
    figures = {
        "ceiling_posts_per_s": round(fires / took, 1),
        "ceiling_cpu_ms_per_post": round(cpu * 1000 / fires, 3),
    }
    print(json.dumps(figures))


def lateness(
    bootstrap: str, port: int, rate: int, seconds: float, procs: int = 1
) -> dict[str, float]:
    with throwaway_prefix(bootstrap) as prefix:
        lanes = Lanes(bootstrap, prefix)
        url = f"http://127.0.0.1:{port}/hook"
        running = dispatchers(bootstrap, prefix, "l", procs)
        try:
            base = stats(port)["distinct"]
            # warm-up orders, one per trigger: when all have landed, every partition is
            # assigned (with --procs, to every process)
            warm = int(time.time() * 1000)
            for i in range(TRIGGERS):
                lanes.put(make_order(url, f"g{i}", warm, 999_999))
            lanes.flush()
            wait_distinct(port, base + TRIGGERS, 120)
            before = stats(port)["distinct"]
            start = time.time()
            sent = 0
            while (now := time.time()) < start + seconds:
                due = int((start + sent / rate) * 1000)
                while due <= now * 1000:
                    lanes.put(make_order(url, f"g{sent % TRIGGERS}", due, sent))
                    sent += 1
                    due = int((start + sent / rate) * 1000)
                time.sleep(0.005)
            lanes.flush()
            wait_distinct(port, before + sent, 300)
            s = stats(port, since=start)
        finally:
            stop_all(running)
        return {
            "procs": procs,
            "rate": rate,
            "fires_at_rate": sent,  # not "fires": the throughput phase's count stays in the JSON
            "delivered": s["window"],
            "delivery_p50_ms": s.get("p50_ms", -1),
            "delivery_p99_ms": s.get("p99_ms", -1),
            "delivery_max_ms": s.get("max_ms", -1),
        }


def profiled(bootstrap: str, prefix: str, port: int, until: float) -> dict[str, float]:
    os.environ.update(env_for(bootstrap, prefix, "p"))
    from horae.settings import Settings
    from horae.streams.dispatcher.config import DispatcherConfig
    from horae.streams.dispatcher.worker import Dispatcher

    d = Dispatcher(DispatcherConfig.from_settings(Settings(), bootstrap))
    loop_prof, pump_prof, commit_prof = cProfile.Profile(), cProfile.Profile(), cProfile.Profile()
    pump_run, commit_loop = d.pump.run, d.pump._commit_loop

    def profiled_call(prof: cProfile.Profile, fn: Callable[[], None]) -> Callable[[], None]:
        def call() -> None:
            prof.enable()
            try:
                fn()
            finally:
                prof.disable()

        return call

    d.pump.run = profiled_call(pump_prof, pump_run)  # type: ignore[method-assign]
    d.pump._commit_loop = profiled_call(commit_prof, commit_loop)  # type: ignore[method-assign]
    stop = threading.Event()
    cpu0 = time.process_time()

    def watch() -> None:
        wait_distinct(port, until)
        stop.set()

    threading.Thread(target=watch, daemon=True).start()
    started = time.time()
    loop_prof.enable()
    d.run(stop)
    loop_prof.disable()
    s = stats(port, since=started)
    for name, prof in (
        ("asyncio loop (sends)", loop_prof),
        ("consumer thread", pump_prof),
        ("committer thread (transactions)", commit_prof),
    ):
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(18)
        print(f"--- profile: {name}, by own time ---")
        print("\n".join(out.getvalue().splitlines()[:40]))
    span = s["last"] - s["first"]
    cpu = time.process_time() - cpu0
    return {
        "posts_per_s": round(s["window"] / span, 1),
        "fires": s["window"],
        "cpu_ms_per_post": round(cpu * 1000 / max(1, s["window"]), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--ceiling-run", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--concurrency", type=int, default=INFLIGHT, help=argparse.SUPPRESS)
    parser.add_argument("--fires", type=int, default=20_000)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--phase",
        choices=("all", "throughput", "ceiling", "lateness"),
        default="all",
        help="what to run",
    )
    parser.add_argument(
        "--procs", type=int, default=1, help="dispatcher processes sharing the lanes (one group)"
    )
    args = parser.parse_args()
    if args.serve:
        serve(args.port)
        return
    if args.ceiling_run:
        ceiling_run(args.port, args.fires, args.concurrency)
        return
    calibration = calibrate()
    print(f"calibration: a 10M-iteration CPython loop takes {calibration} s", flush=True)
    bootstrap = os.environ.get("HORAE_KAFKA_BOOTSTRAP", "127.0.0.1:19092")
    receiver = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert receiver.stdout is not None
        port = int(receiver.stdout.readline())
        result: dict[str, float] = {}
        if args.phase in ("all", "throughput"):
            result.update(throughput(bootstrap, port, args.fires, False, args.procs))
            print(f"throughput: {result}", flush=True)
        if args.phase in ("all", "ceiling"):
            top = ceiling(port, args.fires)
            print(f"HTTP ceiling (the same client, no Kafka): {top}", flush=True)
            result.update(top)
            if "posts_per_s" in result:
                ratio = round(result["posts_per_s"] / top["ceiling_posts_per_s"], 3)
                result["ratio_ceiling"] = ratio
                print(
                    f"goal POSTs/s over the HTTP ceiling >= 0.6: {ratio} "
                    f"({'met' if ratio >= 0.6 else 'MISSED'})",
                    flush=True,
                )
        if args.phase in ("all", "lateness"):
            late = lateness(bootstrap, port, args.rate, args.seconds, args.procs)
            print(f"lateness: {late}", flush=True)
            result.update(late)
        if args.profile:
            prof = throughput(bootstrap, port, args.fires, True)
            print(f"profiled run (in-process, cProfile on): {prof}", flush=True)
            result["profiled_posts_per_s"] = prof["posts_per_s"]
            result["cpu_ms_per_post"] = prof["cpu_ms_per_post"]
        result["cores"] = float(os.cpu_count() or 0)
        result["load_avg_1m"] = round(os.getloadavg()[0], 2)
        result["calibration_s"] = calibration
    finally:
        assert receiver.stdin is not None
        receiver.stdin.close()
        receiver.wait(30)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
