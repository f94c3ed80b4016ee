"""Throughput and latency of ``tfnhr serve`` with and without request batching.

Usage::

    python benchmarks/service_throughput.py [--model best.keras] [--requests 24] [--rounds 3]
                                            [--clients 1,8] [--threads 1] [--out res.json]

Starts one ``tfnhr serve --port 0`` subprocess per server setting (all at once), then, in
``--rounds`` rounds interleaving the settings (so that load from other processes hits every
setting alike), sends ``--requests`` PNG word images (rendered by
:func:`tfnhr.data.synthetic.handwriting.generate`) to ``POST /recognize`` from K client threads for each K
of ``--clients``. Reported per setting and K: requests/s (over all rounds, and per round),
client-side latency (ms: mean, p50, p90) and images per model call (from ``/health``). The
settings:

* ``batching``: the defaults (a 10 ms wait window, 400 000 px per model call);
* ``wait 50``: ``--max-wait-ms 50``;
* ``wait 0``: ``--max-wait-ms 0`` (no waiting; images queued while the model runs still join);
* ``off``: ``--batch-pixels 1`` (every image is a model call of its own).

Without ``--model`` an untrained recognizer of the ``small`` preset (input height
``--height``) is saved to a temp dir: throughput does not depend on the weights. Each setting
is warmed up (one untimed round at the largest K, so the model has traced its batch shapes)
before timing. The server's TensorFlow uses ``--threads`` intra- and inter-op threads (set
through ``TF_NUM_INTRAOP_THREADS`` / ``TF_NUM_INTEROP_THREADS``). Without ``--out`` the JSON
goes to stdout after the table (the table then goes to stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import _harness

VENV_BIN = Path(sys.executable).parent
SETTINGS = {"batching": [], "wait 50": ["--max-wait-ms", "50"], "wait 0": ["--max-wait-ms", "0"],
            "off": ["--batch-pixels", "1"]}


def word_images(count: int, seed: int) -> tuple[list[bytes], list[str]]:
    """``count`` rendered word images as PNG bytes, and their texts."""
    from PIL import Image

    from tfnhr.data.synthetic import handwriting

    bodies, texts = [], []
    for gray, text in handwriting.generate(count, seed=seed, kind="words"):
        buffer = io.BytesIO()
        Image.fromarray(gray).save(buffer, format="PNG")
        bodies.append(buffer.getvalue())
        texts.append(text)
    return bodies, texts


def untrained_model(path: Path, texts: list[str], height: int) -> Path:
    """An untrained ``small`` recognizer for the characters of ``texts``, saved at ``path``."""
    from tfnhr.charset import Charset
    from tfnhr.models import build_recognizer

    build_recognizer(Charset.from_texts(texts), preset="small", input_height=height).save(path)
    return path


@contextlib.contextmanager
def server(model: Path, flags: list[str], threads: int) -> Iterator[int]:
    """A running ``tfnhr serve`` on a free loopback port (yields the port), stopped by SIGTERM."""
    env = {**os.environ, "TF_NUM_INTRAOP_THREADS": str(threads), "TF_NUM_INTEROP_THREADS": str(threads),
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    process = subprocess.Popen([str(VENV_BIN / "tfnhr"), "serve", "--model", str(model), "--port", "0", *flags],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        line = process.stdout.readline()
        match = re.search(r"http://[\d.]+:(\d+)", line)
        if not match:
            raise RuntimeError(f"tfnhr serve {' '.join(flags)} did not start: {line!r}")
        yield int(match[1])
    finally:
        process.terminate()
        process.wait(60)


def call(port: int, method: str, path: str, body: bytes | None = None) -> dict:
    """One request; the JSON answer (raises on a non-200 status)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        connection.request(method, path, body=body, headers={"Content-Type": "image/png"} if body else {})
        response = connection.getresponse()
        answer = json.loads(response.read())
    finally:
        connection.close()
    if response.status != 200:
        raise RuntimeError(f"{method} {path}: {response.status} {answer}")
    return answer


def fire(port: int, bodies: list[bytes], requests: int, clients: int) -> dict:
    """``requests`` recognitions from ``clients`` threads: wall seconds, per-request latencies
    (ms) and model calls (from ``/health``)."""
    before = call(port, "GET", "/health")
    latencies: list[float] = []
    lock = threading.Lock()

    def one(index: int) -> None:
        started = time.perf_counter()
        call(port, "POST", "/recognize", bodies[index % len(bodies)])
        with lock:
            latencies.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, range(requests)))
    seconds = time.perf_counter() - started
    batches = call(port, "GET", "/health")["batches_run"] - before["batches_run"]
    return {"clients": clients, "requests": requests, "seconds": seconds, "latencies": latencies, "batches": batches}


def summarise(rounds: list[dict]) -> dict:
    """Rounds of :func:`fire` -> requests/s over all rounds (and per round), latency (ms:
    mean, p50, p90) and images per model call."""
    requests, seconds = sum(r["requests"] for r in rounds), sum(r["seconds"] for r in rounds)
    latencies = [latency for r in rounds for latency in r["latencies"]]
    return {"clients": rounds[0]["clients"], "requests": requests, "seconds": round(seconds, 3),
            "requests_per_s": round(requests / seconds, 2),
            "rounds_requests_per_s": [round(r["requests"] / r["seconds"], 2) for r in rounds],
            "latency_ms": {"mean": round(statistics.mean(latencies), 1), "p50": round(statistics.median(latencies), 1),
                           "p90": round(statistics.quantiles(latencies, n=10)[-1], 1)},
            "images_per_model_call": round(requests / sum(r["batches"] for r in rounds), 2)}


def measure(args: argparse.Namespace) -> dict:
    clients = [int(k) for k in args.clients.split(",")]
    bodies, texts = word_images(args.images, args.seed)
    runs: dict[str, dict[int, list[dict]]] = {name: {k: [] for k in clients} for name in SETTINGS}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as servers:
        model = args.model or untrained_model(Path(tmp) / "model.keras", texts, args.height)
        ports = {name: servers.enter_context(server(model, flags, args.threads)) for name, flags in SETTINGS.items()}
        for port in ports.values():
            fire(port, bodies, max(clients) * 2, max(clients))  # warm-up: trace the batch shapes
        for _ in range(args.rounds):  # interleaved, so that load from others hits every setting alike
            for name, port in ports.items():
                for k in clients:
                    runs[name][k].append(fire(port, bodies, args.requests, k))
    results = {name: {"flags": SETTINGS[name], "runs": [summarise(runs[name][k]) for k in clients]}
               for name in SETTINGS}
    for name, result in results.items():
        for run in result["runs"]:
            print(f"{name:>8}  {run['clients']:>2} clients  {run['requests_per_s']:7.2f} req/s "
                  f"(rounds {'/'.join(f'{r:.2f}' for r in run['rounds_requests_per_s'])})  latency "
                  f"mean {run['latency_ms']['mean']:7.1f} ms  p90 {run['latency_ms']['p90']:7.1f} ms  "
                  f"{run['images_per_model_call']:5.2f} images/model call", flush=True)
    rate = {name: {run["clients"]: run["requests_per_s"] for run in result["runs"]} for name, result in results.items()}
    most = max(clients)
    ratios = {f"batching vs {other} at {most} clients": round(rate["batching"][most] / rate[other][most], 2)
              for other in SETTINGS if other != "batching"}
    fewest = min(clients)
    ratios[f"batching: {most} vs {fewest} clients"] = round(rate["batching"][most] / rate["batching"][fewest], 2)
    for name, ratio in ratios.items():
        print(f"{name}: {ratio}x")
    return {"model": str(args.model or f"untrained small, height {args.height}"), "threads": args.threads,
            "rounds": args.rounds, "cpus": os.cpu_count(), "load_average_after": os.getloadavg(),
            "settings": results, "ratios": ratios}


def main(argv=None) -> int:
    parser = _harness.parser(__doc__, rounds=3, threads_help="TensorFlow intra- and inter-op threads of the server")
    parser.add_argument("--model", type=Path, default=None, help="a saved recognizer (default: untrained small)")
    parser.add_argument("--height", type=int, default=48, help="input height of the untrained model (px)")
    parser.add_argument("--requests", type=int, default=24,
                        help="timed requests per setting, client count and round")
    parser.add_argument("--clients", default="1,8", help="comma-separated client thread counts")
    parser.add_argument("--images", type=int, default=24, help="distinct word images sent in turn")
    parser.add_argument("--seed", type=int, default=0, help="seed of the rendered words")
    return _harness.main(measure, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
