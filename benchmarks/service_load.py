"""How ``tfnhr serve`` holds up under many simultaneous clients and a long steady load.

Usage::

    python benchmarks/service_load.py [--model best.keras] [--levels 50,200,500] [--requests-per-client 2]
                                      [--processes 8] [--soak-minutes 10] [--soak-clients 20]
                                      [--sample-seconds 5] [--server-flags "--max-requests 64"]
                                      [--threads 1] [--quick] [--out res.json]

Starts one ``tfnhr serve --port 0`` on loopback (with ``--server-flags``, e.g. ``--backlog``,
``--max-requests``, ``--header-timeout``, ``--body-timeout``), warms it up, then for each level
N of ``--levels`` runs two kinds of N simultaneous clients, each sending
``--requests-per-client`` ``POST /recognize`` of a small PNG word image, one request per
connection (``http.client``, 120 s timeout), then stopping:

* ``threads``: N threads of this process, released together by a ``threading.Barrier``;
* ``processes``: the N clients spread over ``--processes`` worker processes (``spawn``), each
  running its share as threads; all are released at the same moment by a barrier across the
  processes.

Per level and kind it reports the HTTP statuses, the resets (requests that got no HTTP status:
connection reset or refused, broken pipe, remote disconnect, timeout; counted by exception
type), requests/s (200 answers / wall time of the level), latency p50/p99 of the 200s and of all
answered requests, whether the 503 answers carried ``Retry-After``, and the change of the kernel's
listen-queue counters (``TcpExt`` ``ListenOverflows``, ``ListenDrops`` of ``/proc/net/netstat``;
they count the whole network namespace, which on a quiet machine is this server). The goal:
**no resets at any level**; a server past its capacity answers 503 with ``Retry-After`` instead.

Then a soak (``--soak-minutes``; 0 skips it): ``--soak-clients`` threads send requests in a loop
until the time is up while the server's RSS (``VmRSS``) is sampled every ``--sample-seconds``:
RSS first/last/max, the least-squares slope (MiB/minute) over the second half of the samples
(after warm-up), requests served, statuses and resets. A progress line goes to stderr each minute.

Without ``--model`` an untrained recognizer of the ``small`` preset is served (load does not
depend on the weights); the server's TensorFlow uses ``--threads`` intra- and inter-op threads.
``--quick`` is a smoke run of about 2 minutes (levels 10,20; a 0.2-minute soak sampled every
second; explicit options still win). Without ``--out`` the JSON goes to stdout after the table
(the table then goes to stderr).
"""

from __future__ import annotations

import argparse
import collections
import http.client
import math
import multiprocessing
import os
import shlex
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import _harness
import service_throughput

TIMEOUT_S = 120.0
"""Client socket timeout of one request (connect, send, each read)."""
QUICK = {"levels": "10,20", "soak_minutes": 0.2, "sample_seconds": 1.0}
"""The defaults that ``--quick`` puts in place of the usual ones."""
NETSTAT_COUNTERS = ("ListenOverflows", "ListenDrops")


class Outcome(NamedTuple):
    """One request as the client saw it: the HTTP status (None: no answer) or the exception's type
    name, whether the answer had ``Retry-After``, and wall-clock start and end (``time.time()``,
    comparable across processes)."""

    status: int | None
    error: str | None
    retry_after: bool
    started: float
    ended: float

    @property
    def latency_ms(self) -> float:
        return (self.ended - self.started) * 1000


# --------------------------------------------------------------------------- clients


def request(port: int, body: bytes) -> Outcome:
    """One ``POST /recognize`` on a connection of its own."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    started = time.time()
    try:
        connection.request("POST", "/recognize", body=body, headers={"Content-Type": "image/png"})
        response = connection.getresponse()
        response.read()
        return Outcome(response.status, None, response.getheader("Retry-After") is not None, started, time.time())
    except (OSError, http.client.HTTPException) as error:  # resets, refusals, timeouts: no HTTP status
        return Outcome(None, type(error).__name__, False, started, time.time())
    finally:
        connection.close()


def client(port: int, body: bytes, requests: int, start: Callable[[], object], outcomes: list[Outcome]) -> None:
    """Wait for ``start()`` to return, then send ``requests`` requests one after the other."""
    start()
    for _ in range(requests):
        outcomes.append(request(port, body))  # list.append is atomic: the clients share the list


def run_threads(port: int, bodies: list[bytes], clients: int, requests: int) -> list[Outcome]:
    """``clients`` threads of this process, released together, ``requests`` requests each."""
    barrier = threading.Barrier(clients)
    outcomes: list[Outcome] = []
    threads = [threading.Thread(target=client, args=(port, bodies[i % len(bodies)], requests, barrier.wait, outcomes))
               for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def process_clients(port: int, bodies: list[bytes], clients: int, requests: int, barrier, results) -> None:
    """A worker process of the ``processes`` kind: ``clients`` threads that start when every
    process has passed ``barrier``; puts their outcomes on ``results``."""
    go = threading.Event()
    outcomes: list[Outcome] = []
    threads = [threading.Thread(target=client, args=(port, bodies[i % len(bodies)], requests, go.wait, outcomes))
               for i in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    go.set()
    for thread in threads:
        thread.join()
    results.put([tuple(outcome) for outcome in outcomes])


def run_processes(port: int, bodies: list[bytes], clients: int, requests: int, processes: int) -> list[Outcome]:
    """``clients`` clients spread over ``processes`` spawned worker processes, all released at once."""
    context = multiprocessing.get_context("spawn")
    shares = [clients // processes + (i < clients % processes) for i in range(min(processes, clients))]
    barrier, results = context.Barrier(len(shares) + 1), context.Queue()
    workers = [context.Process(target=process_clients, args=(port, bodies, share, requests, barrier, results))
               for share in shares]
    for worker in workers:
        worker.start()
    try:
        barrier.wait(timeout=120)  # every worker has its threads waiting
        deadline = requests * (TIMEOUT_S + 10) + 60
        outcomes = [Outcome(*row) for _ in workers for row in results.get(timeout=deadline)]
    finally:
        for worker in workers:
            worker.join(timeout=10)
            if worker.is_alive():
                worker.terminate()
    return outcomes


# --------------------------------------------------------------------------- server side


def netstat() -> dict[str, int] | None:
    """The kernel's listen-queue counters (:data:`NETSTAT_COUNTERS`), None if unreadable."""
    try:
        with open("/proc/net/netstat") as f:
            lines = [line.split() for line in f if line.startswith("TcpExt:")]
        values = dict(zip(lines[0][1:], map(int, lines[1][1:])))
        return {name: values[name] for name in NETSTAT_COUNTERS}
    except (OSError, IndexError, KeyError, ValueError):
        return None


def listener_pid(port: int) -> int | None:
    """The process listening on loopback ``port`` (the server), found by its socket's inode in
    ``/proc/net/tcp`` and the file descriptors of the processes this user may read."""
    inode = None
    try:
        with open("/proc/net/tcp") as f:
            for row in (line.split() for line in list(f)[1:]):
                if row[3] == "0A" and int(row[1].split(":")[1], 16) == port:  # 0A: LISTEN
                    inode = row[9]
    except OSError:
        return None
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") == target for fd in os.listdir(f"/proc/{pid}/fd")):
                return int(pid)
        except OSError:
            continue
    return None


def rss_mib(pid: int) -> float | None:
    """``VmRSS`` of process ``pid`` in MiB (None when unreadable)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


# --------------------------------------------------------------------------- summaries


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank ``q``-th percentile of ``values`` (None when empty), rounded to 0.1."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)], 1)


def summarise(outcomes: list[Outcome]) -> dict:
    """Statuses, resets by exception type, 200s/s over the wall time from the first request's
    start to the last one's end, latency p50/p99 (ms) of the 200s and of all answers, and the
    503s with ``Retry-After``."""
    answered = [o for o in outcomes if o.status is not None]
    ok = [o.latency_ms for o in answered if o.status == 200]
    wall = max(o.ended for o in outcomes) - min(o.started for o in outcomes)
    unavailable = [o for o in answered if o.status == 503]
    return {
        "requests": len(outcomes), "wall_s": round(wall, 3),
        "statuses": dict(sorted(collections.Counter(o.status for o in answered).items())),
        "resets": dict(collections.Counter(o.error for o in outcomes if o.error)),
        "ok_per_s": round(len(ok) / wall, 2),
        "latency_ms_200": {"p50": percentile(ok, 50), "p99": percentile(ok, 99)},
        "latency_ms_answered": {"p50": percentile([o.latency_ms for o in answered], 50),
                                "p99": percentile([o.latency_ms for o in answered], 99)},
        "503_with_retry_after": f"{sum(o.retry_after for o in unavailable)}/{len(unavailable)}",
    }


def delta(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, int] | None:
    return None if before is None or after is None else {name: after[name] - before[name] for name in before}


def run_level(port: int, bodies: list[bytes], clients: int, kind: str, args: argparse.Namespace) -> dict:
    """One level of ``clients`` simultaneous clients of ``kind``, with the listen-queue counters' change."""
    before = netstat()
    if kind == "threads":
        outcomes = run_threads(port, bodies, clients, args.requests_per_client)
    else:
        outcomes = run_processes(port, bodies, clients, args.requests_per_client, args.processes)
    return {"clients": clients, "kind": kind, **summarise(outcomes), "listen_queue": delta(before, netstat())}


def resets_text(resets: dict[str, int]) -> str:
    """``0``, or the total and the count of each exception type."""
    total = sum(resets.values())
    return f"{total} ({', '.join(f'{name} {count}' for name, count in resets.items())})" if total else "0"


def print_level(row: dict) -> None:
    """One table row of :func:`run_level`'s result."""
    queue = row["listen_queue"]
    overflows = "n/a" if queue is None else f"+{queue['ListenOverflows']}/+{queue['ListenDrops']}"
    print(f"{row['clients']:>5} {row['kind']:>9}  {row['ok_per_s']:7.2f} 200/s  "
          f"200 p50/p99 {row['latency_ms_200']['p50']}/{row['latency_ms_200']['p99']} ms  "
          f"all p50/p99 {row['latency_ms_answered']['p50']}/{row['latency_ms_answered']['p99']} ms  "
          f"statuses {row['statuses']}  resets {resets_text(row['resets'])}  "
          f"503 w/ Retry-After {row['503_with_retry_after']}  "
          f"listen overflows/drops {overflows}  ({row['wall_s']:.1f} s)", flush=True)


# --------------------------------------------------------------------------- soak


def slope_mib_per_min(samples: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of RSS (MiB) over time (minutes) of the second half of ``samples``."""
    later = samples[len(samples) // 2:]
    if len(later) < 2:
        return None
    return round(statistics.linear_regression([t for t, _ in later], [m for _, m in later]).slope, 3)


def soak(port: int, pid: int | None, bodies: list[bytes], args: argparse.Namespace) -> dict:
    """``--soak-clients`` threads sending requests until ``--soak-minutes`` are up, the server's RSS
    sampled every ``--sample-seconds``."""
    started = time.monotonic()
    deadline = started + args.soak_minutes * 60
    outcomes: list[Outcome] = []

    def loop(body: bytes) -> None:
        while time.monotonic() < deadline:
            outcomes.append(request(port, body))

    threads = [threading.Thread(target=loop, args=(bodies[i % len(bodies)],)) for i in range(args.soak_clients)]
    for thread in threads:
        thread.start()
    samples: list[tuple[float, float]] = []
    minutes_logged = 0
    while (now := time.monotonic()) < deadline:
        if pid is not None and (rss := rss_mib(pid)) is not None:
            samples.append(((now - started) / 60, rss))
        if (now - started) // 60 > minutes_logged:
            minutes_logged += 1
            rss_now = f"{samples[-1][1]:.1f} MiB" if samples else "n/a"
            _harness.log(f"soak: minute {minutes_logged} of {args.soak_minutes:g}: {len(outcomes)} requests, "
                         f"RSS {rss_now}")
        time.sleep(min(args.sample_seconds, max(0.0, deadline - time.monotonic())))
    for thread in threads:
        thread.join()
    rss = [m for _, m in samples]
    summary = summarise(outcomes)
    return {"minutes": args.soak_minutes, "clients": args.soak_clients, "server_pid_found": pid is not None,
            "requests": summary["requests"], "served": summary["statuses"].get(200, 0),
            "statuses": summary["statuses"], "resets": summary["resets"], "ok_per_s": summary["ok_per_s"],
            "latency_ms_200": summary["latency_ms_200"],
            "rss_mib": {"first": round(rss[0], 1), "last": round(rss[-1], 1), "max": round(max(rss), 1)} if rss else None,
            "rss_slope_mib_per_min_second_half": slope_mib_per_min(samples),
            "samples": [(round(t, 3), round(m, 1)) for t, m in samples]}


def print_soak(result: dict) -> None:
    rss = result["rss_mib"]
    print(f"soak {result['minutes']:g} min, {result['clients']} clients: {result['served']} served "
          f"({result['ok_per_s']:.2f} 200/s), statuses {result['statuses']}, resets "
          f"{resets_text(result['resets'])}; RSS "
          + ("n/a" if rss is None else f"first {rss['first']} last {rss['last']} max {rss['max']} MiB, "
                                       f"slope {result['rss_slope_mib_per_min_second_half']} MiB/min (second half)"),
          flush=True)


# --------------------------------------------------------------------------- main


def measure(args: argparse.Namespace) -> dict:
    levels = [int(n) for n in args.levels.split(",")]
    flags = shlex.split(args.server_flags)
    bodies, texts = service_throughput.word_images(args.images, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or service_throughput.untrained_model(Path(tmp) / "model.keras", texts, args.height)
        _harness.log(f"starting tfnhr serve {' '.join(flags)}")
        with service_throughput.server(model, flags, args.threads) as port:
            pid = listener_pid(port)
            warm_up = summarise(run_threads(port, bodies, 4, 2))
            _harness.log(f"server on port {port} (pid {pid}); warm-up statuses {warm_up['statuses']} "
                         f"resets {warm_up['resets']}")
            rows = []
            for clients in levels:
                for kind in ("threads", "processes"):
                    rows.append(run_level(port, bodies, clients, kind, args))
                    print_level(rows[-1])
            soaked = soak(port, pid, bodies, args) if args.soak_minutes > 0 else None
    if soaked:
        print_soak(soaked)
    resets = {f"{row['clients']} {row['kind']}": sum(row["resets"].values()) for row in rows}
    goal_met = not any(resets.values()) and not (soaked and soaked["resets"])
    print(f"goal, no resets at any level{' or in the soak' if soaked else ''}: {'met' if goal_met else 'MISSED'}")
    return {"model": str(args.model or f"untrained small, height {args.height}"), "threads": args.threads,
            "server_flags": flags, "requests_per_client": args.requests_per_client, "processes": args.processes,
            "client_timeout_s": TIMEOUT_S, "cpus": os.cpu_count(), "warm_up": warm_up, "levels": rows,
            "soak": soaked, "resets": resets, "goal_no_resets_met": goal_met}


def main(argv=None) -> int:
    parser = _harness.parser(__doc__, threads_help="TensorFlow intra- and inter-op threads of the server")
    parser.add_argument("--model", type=Path, default=None, help="a saved recognizer (default: untrained small)")
    parser.add_argument("--height", type=int, default=48, help="input height of the untrained model (px)")
    parser.add_argument("--server-flags", default="",
                        help='extra options of tfnhr serve, one string (e.g. "--max-requests 64 --backlog 1024")')
    parser.add_argument("--levels", default="50,200,500", help="comma-separated counts of simultaneous clients")
    parser.add_argument("--requests-per-client", type=int, default=2, help="requests each client sends")
    parser.add_argument("--processes", type=int, default=8, help="worker processes of the processes kind")
    parser.add_argument("--soak-minutes", type=float, default=10, help="length of the soak (0: no soak)")
    parser.add_argument("--soak-clients", type=int, default=20, help="client threads of the soak")
    parser.add_argument("--sample-seconds", type=float, default=5, help="RSS sampling interval of the soak")
    parser.add_argument("--images", type=int, default=8, help="distinct word images sent in turn")
    parser.add_argument("--seed", type=int, default=0, help="seed of the rendered words")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: levels 10,20, a 0.2-minute soak sampled every second")
    args = parser.parse_args(argv)
    if args.quick:  # quick defaults; options given explicitly still win
        parser.set_defaults(**QUICK)
        args = parser.parse_args(argv)
    return _harness.main(measure, args)


if __name__ == "__main__":
    sys.exit(main())
