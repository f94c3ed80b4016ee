"""Training on every core of this machine as single-threaded Horovod workers.

A second process with its own thread trains 1.55x the lines of one on 2 cores (with the compiled
MDLSTM scan; 1.64x with the TensorFlow-ops scan, whose small per-column ops a second thread in
one process slows down; docs/performance.md, "Training throughput").
:func:`run_local_workers` starts ``horovodrun -np N``
(Gloo, loopback) over ``python -m horovod_jobs.train --task nhr`` with the given ``tfnhr train``
arguments, every worker with one TensorFlow and one OpenMP thread; the workers average their
gradients every step and rank 0 writes the run folder (docs/horovod.md).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

SINGLE_THREAD_ENV = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", "OMP_NUM_THREADS": "1"}
"""What each worker process gets in its environment."""
MAX_DEFAULT_WORKERS = 8
""":func:`default_workers` never picks more than this many."""


def horovodrun_path() -> str | None:
    """The ``horovodrun`` next to this Python (the virtualenv's), else the one on the PATH, else ``None``."""
    beside = Path(sys.executable).parent / "horovodrun"
    return str(beside) if beside.exists() else shutil.which("horovodrun")


def default_workers() -> int:
    """One worker per core this process may use (at most :data:`MAX_DEFAULT_WORKERS`) when Horovod
    and ``horovodrun`` are installed, else 1."""
    if importlib.util.find_spec("horovod") is None or horovodrun_path() is None:
        return 1
    return max(1, min(MAX_DEFAULT_WORKERS, len(os.sched_getaffinity(0))))


def run_local_workers(train_arguments: Sequence[str], workers: int) -> None:
    """Run ``tfnhr train`` with ``train_arguments`` (its options, without the command name) as
    ``workers`` single-threaded Horovod processes on this machine; their output goes to this
    process's stdout/stderr. ``RuntimeError`` when ``horovodrun`` is missing or the job fails."""
    launcher = horovodrun_path()
    if launcher is None:
        raise RuntimeError(f"training with {workers} workers needs Horovod's horovodrun, which is not installed "
                           "(make setup builds it); use one worker")
    command = [launcher, "-np", str(workers), "-H", f"localhost:{workers}", "--gloo",
               sys.executable, "-m", "horovod_jobs.train", "--task", "nhr", *train_arguments]
    result = subprocess.run(command, env={**os.environ, **SINGLE_THREAD_ENV})
    if result.returncode != 0:
        raise RuntimeError(f"training with {workers} Horovod workers failed (exit status {result.returncode}; "
                           "each rank's reason is printed above)")
