"""Training on this machine as single-threaded Horovod workers (``tfnhr train --workers N``,
``python -m tfnhr.commands.main_job --workers N``).

Two single-threaded workers train 1.55x the lines/s of one on 2 cores with the compiled MDLSTM
scan, about as many as one process on 2 threads, which makes twice the updates for them
(docs/lab/throughput.md; every layout: docs/results.md#horovod-scaling); with the
TensorFlow-ops scan, whose small per-column ops a second thread in one process slows down, workers
are the faster way to use more cores. :func:`run_local_workers` starts ``horovodrun -np N``
(Gloo, loopback) over ``python -m horovod_jobs.train --task nhr`` with the given ``tfnhr train``
arguments, every worker with one TensorFlow and one OpenMP thread; the workers average their
gradients every step and rank 0 writes the run folder (docs/horovod.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import BinaryIO
from pathlib import Path

SINGLE_THREAD_ENV = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", "OMP_NUM_THREADS": "1"}
"""What each worker process gets in its environment."""


def horovodrun_path() -> str | None:
    """The ``horovodrun`` next to this Python (the virtualenv's), else the one on the PATH, else ``None``."""
    beside = Path(sys.executable).parent / "horovodrun"
    return str(beside) if beside.exists() else shutil.which("horovodrun")


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
    launcher_process = subprocess.Popen(command, env={**os.environ, **SINGLE_THREAD_ENV}, stderr=subprocess.PIPE)
    forward_without_launcher_traceback(launcher_process.stderr, sys.stderr.buffer)
    result = launcher_process.wait()
    if result != 0:
        raise RuntimeError(f"training with {workers} Horovod workers failed (exit status {result}; "
                           "each rank's reason is printed above)")


LAUNCHER_FAILURE = b"RuntimeError: Horovod detected that one or more processes exited with non-zero status"
"""The last line of ``horovodrun``'s own traceback when a worker failed (the worker's reason is in
its own, ``[rank]<stderr>:``-prefixed lines before it)."""


def forward_without_launcher_traceback(source: BinaryIO, target: BinaryIO) -> None:
    """Copy ``horovodrun``'s stderr ``source`` to ``target`` line by line as it comes, except the
    launcher's own Python traceback that ends in :data:`LAUNCHER_FAILURE` (the workers' lines are
    prefixed by their rank, the launcher's are not); any other traceback is copied whole."""
    held: list[bytes] = []
    for line in source:
        if held or line.startswith(b"Traceback (most recent call last):"):
            held.append(line)
            if line.startswith(LAUNCHER_FAILURE):
                held = []  # what follows (the failed process's name and status) is kept
            continue
        target.write(line)
        target.flush()
    target.writelines(held)
    target.flush()
