"""What the benchmarks in this folder share: arguments, thread pools, timing, child processes and
the JSON report with a record of the environment it was measured in.

A benchmark runs as ``python benchmarks/NAME.py`` from the repository root; the script's folder
is then ``sys.path[0]``, so ``import _harness`` finds this module, and the project's packages
come from the virtual environment (installed in editable mode). The shape of a benchmark::

    import _harness

    def measure(args) -> dict:
        tf = _harness.set_threads(args.threads)  # before TensorFlow runs its first op
        ...                                      # print tables and results with print()
        return report

    def main(argv=None) -> int:
        parser = _harness.parser(__doc__, rounds=5)
        parser.add_argument(...)                 # the benchmark's own options
        return _harness.main(measure, parser.parse_args(argv))

    if __name__ == "__main__":
        sys.exit(main())

:func:`main` sends what ``measure`` prints to stdout when ``--out`` names the JSON file and to
stderr when it does not, so that stdout is then the JSON alone; progress lines go to stderr
always (:func:`log`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
"""The repository root (benchmarks run from here; child processes too)."""

TUNED_ENV = {"TF_CPU_ALLOCATOR_USE_BFC": "true", "XLA_FLAGS": "--xla_cpu_use_thunk_runtime=false"}
"""``--tuned-env`` of the MDLSTM benchmarks: TensorFlow's BFC allocator on CPU (it keeps large
blocks instead of returning them to the OS, so steps do not page-fault their tensors in again)
and XLA:CPU's classic runtime (one compiled function per loop body instead of a "thunk" per
kernel). Process settings: they must be in the environment before TensorFlow starts."""

RECORDED_VARIABLES = ("TF_ENABLE_ONEDNN_OPTS", "TF_CPU_ALLOCATOR_USE_BFC", "XLA_FLAGS",
                      "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS",
                      "CUDA_VISIBLE_DEVICES")
"""Environment variables that change what TensorFlow runs; :func:`environment` records those set."""


# --------------------------------------------------------------------------- arguments


def parser(doc: str, *, threads: int | None = 1, threads_help: str = "TensorFlow intra- and inter-op threads",
           rounds: int | None = None, tuned_env: bool = False) -> argparse.ArgumentParser:
    """An argument parser described by the first paragraph of ``doc`` (the script's docstring),
    with ``--out`` (the JSON report's file), ``--threads`` (default ``threads``; ``None``: no
    such option), if ``rounds`` is given ``--rounds`` (default ``rounds``), and with
    ``tuned_env`` the flag ``--tuned-env`` (for :func:`tuned_env`)."""
    first_paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    result = argparse.ArgumentParser(description=first_paragraph)
    if threads is not None:
        result.add_argument("--threads", type=int, default=threads, help=f"{threads_help} (default {threads})")
    if rounds is not None:
        result.add_argument("--rounds", type=int, default=rounds,
                            help=f"timed rounds; the compared variants run interleaved, one call each per "
                                 f"round, so that load from other processes hits them alike (default {rounds})")
    if tuned_env:
        result.add_argument("--tuned-env", action="store_true",
                            help="time with the BFC allocator and XLA's classic CPU runtime (TUNED_ENV)")
    result.add_argument("--out", type=Path, help="write the JSON report here (default: print it to stdout)")
    return result


# --------------------------------------------------------------------------- TensorFlow


def set_threads(threads: int):
    """Size TensorFlow's intra- and inter-op thread pools to ``threads`` (0: TensorFlow's default,
    all cores) and return the ``tensorflow`` module. Call it before TensorFlow runs an op: the
    pools are fixed from then on."""
    import tensorflow as tf

    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    return tf


def tuned_env(on: bool) -> dict | str:
    """With ``on``, put :data:`TUNED_ENV` into this process's environment (call it before
    TensorFlow is imported). Returns what the report records as the environment of the timings:
    :data:`TUNED_ENV` or ``"default"``."""
    if on:
        os.environ.update(TUNED_ENV)
        return TUNED_ENV
    return "default"


# --------------------------------------------------------------------------- timing


def timed(function: Callable, *args, **kwargs) -> tuple[object, float, float]:
    """``(result, wall seconds, process CPU seconds)`` of one call ``function(*args, **kwargs)``.
    The CPU time counts all of the process's threads; with one thread on an otherwise idle core
    it equals the wall time, and it is robust to other processes on shared cores."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def spread(values: Sequence[float], keep_all: bool = False) -> dict:
    """Median, least and largest of ``values`` (one per round or run), and with ``keep_all``
    the values themselves (``"all"``)."""
    figures: dict = {"median": statistics.median(values), "min": min(values), "max": max(values)}
    return {**figures, "all": list(values)} if keep_all else figures


def matmul_call(tf, size: int = 1024) -> Callable[[], object]:
    """A no-argument call that runs one float32 ``size`` x ``size`` matmul to completion."""
    a = tf.random.normal([size, size])
    product = tf.function(lambda x: tf.matmul(x, x))
    return lambda: product(a).numpy()


def matmul_peak_gflops(tf, size: int = 1024, repeats: int = 10) -> float:
    """The machine's matmul peak under the current thread pools: float32 GFLOP/s of a ``size`` x
    ``size`` ``tf.matmul``, best of ``repeats`` (after one warm-up call)."""
    call = matmul_call(tf, size)
    call()
    best = min(timed(call)[1] for _ in range(repeats))
    return 2 * size ** 3 / best / 1e9


def scan_flops(units: int, channels: int, cells: int, directions: int = 4) -> float:
    """Matmul FLOPs of one MDLSTM scan, forward + backward, over ``cells`` computed cells (per
    direction) of the Leaky LP cell: forward the gate matmul over ``[x; 1; h1; h2; s1; s2]`` (the
    two peephole gates) and ``[x; 1; h1; h2]`` (the other three) plus the output peephole,
    backward twice that (input and weight gradients)."""
    k = channels + 1 + 2 * units
    forward = 2 * (2 * units * (k + 2 * units) + 3 * units * k) + 2 * 2 * units * units
    return 3.0 * forward * cells * directions


@dataclass
class Times:
    """Wall and process CPU seconds of a step's timed calls, in call order."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def interleaved(steps: Mapping[Hashable, Callable[[], object]], rounds: int, warmup: int = 0
                ) -> dict[Hashable, Times]:
    """Call every step once per round, in turn: ``warmup`` untimed rounds (tracing, compilation,
    allocation), then ``rounds`` timed ones, so that load changes on shared cores hit every step
    alike. Returns the :class:`Times` of each step."""
    times = {name: Times() for name in steps}
    for round_number in range(warmup + rounds):
        for name, step in steps.items():
            _, wall, cpu = timed(step)
            if round_number >= warmup:
                times[name].wall.append(wall)
                times[name].cpu.append(cpu)
    return times


def status_kb(field: str) -> int:
    """A memory field of ``/proc/self/status`` in KiB: ``VmRSS`` (resident now), ``VmHWM`` (the
    resident high-water mark since this process started; Linux only)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


# --------------------------------------------------------------------------- child processes


def single_threaded_child_env() -> dict[str, str]:
    """This process's environment for a CPU-only child whose own thread pools are one thread
    each (OpenMP pinned to one, TensorFlow's info logs off)."""
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}


def run_child(script: str | os.PathLike, args: Sequence[str], env: Mapping[str, str] | None = None) -> dict:
    """Run ``python SCRIPT ARGS`` in a fresh process (``env``: its environment, default this
    process's) and return the JSON object it prints as its last line on stdout. A fresh process
    measures what a step needs from a clean start (peak memory) or runs under other process
    settings. Raises RuntimeError with the end of its stderr when it fails."""
    process = subprocess.run([sys.executable, str(script), *args], env=None if env is None else dict(env),
                             capture_output=True, text=True, check=False)
    if process.returncode != 0:
        command = " ".join([Path(script).name, *args])
        raise RuntimeError(f"{command[:300]} failed (exit status {process.returncode}):\n{process.stderr[-4000:]}")
    return json.loads(process.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- environment and report


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo ("unknown" elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _version(*distributions: str) -> str | None:
    """The installed version of the first of ``distributions`` that is installed."""
    for distribution in distributions:
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            pass
    return None


def _git_commit() -> str | None:
    """The checked-out commit of the repository (None outside a git checkout). Reads only."""
    try:
        process = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                                 check=False, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return process.stdout.strip() or None


def environment() -> dict:
    """What a figure depends on besides the code: versions, the CPU, the cores this process may
    use, TensorFlow's thread pools (if this process imported TensorFlow; 0 means TensorFlow's
    default), the environment variables of :data:`RECORDED_VARIABLES` that are set, the load
    average, the command line and the git commit."""
    record = {
        "python": platform.python_version(),
        "tensorflow": _version("tensorflow", "tensorflow-cpu"), "keras": _version("keras"),
        "numpy": _version("numpy"),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_allowed": len(os.sched_getaffinity(0)),
    }
    if "tensorflow" in sys.modules:
        threading = sys.modules["tensorflow"].config.threading
        record["tf_threads"] = {"intra_op": threading.get_intra_op_parallelism_threads(),
                                "inter_op": threading.get_inter_op_parallelism_threads()}
    record["variables"] = {name: os.environ[name] for name in RECORDED_VARIABLES if name in os.environ}
    record["loadavg"] = [round(load, 2) for load in os.getloadavg()]
    record["command"] = [Path(sys.argv[0]).name, *sys.argv[1:]]
    record["git_commit"] = _git_commit()
    return record


def write_report(report: dict, out: Path | None) -> None:
    """Write ``report`` with its ``"environment"`` (:func:`environment`) as JSON: to ``out``
    (folders made as needed; its path then printed) or, without ``out``, to stdout."""
    text = json.dumps({**report, "environment": environment()}, indent=1) + "\n"
    if out is None:
        sys.stdout.write(text)
        return
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"JSON report: {out}")


def main(measure: Callable[[argparse.Namespace], dict], args: argparse.Namespace) -> int:
    """Run ``measure(args)``, write the report it returns (:func:`write_report` to ``args.out``)
    and return the exit status, 0. What ``measure`` prints goes to stdout with ``--out`` and to
    stderr without, so that stdout is then the JSON alone. A failed measurement raises (exit
    status 1, or the code of a ``SystemExit``)."""
    with contextlib.redirect_stdout(sys.stdout if args.out else sys.stderr):
        report = measure(args)
    write_report(report, args.out)
    return 0


def log(*parts) -> None:
    """A progress line on stderr (flushed at once; not part of the tables)."""
    print(*parts, file=sys.stderr, flush=True)
