"""Real Horovod jobs of ``train.py`` for the tests: each rank in its own working folder, the
launcher's result, signals sent to a rank mid-training, the tail of a job's output."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers.environment import REPO

JOB_ENV = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "",
           "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}
"""The environment of the jobs' processes: the repository importable, TensorFlow quiet, no GPU, one thread."""


def launch(horovodrun: Path, root: Path, args: list[str], ranks: int = 2, prefix: str = "exec",
           env: dict | None = None) -> tuple[subprocess.CompletedProcess, float]:
    """``train.py ARGS`` on ``ranks`` local Gloo workers, rank r in ``root/rank{r}``; returns the
    finished launcher and its wall seconds. ``$HOROVOD_RANK`` in ``args`` and ``prefix`` (the
    shell commands before the worker's, ending in ``exec``) is expanded per rank; ``env`` is added
    to the workers' environment."""
    for rank in range(ranks):
        (root / f"rank{rank}").mkdir(parents=True)
    script = f'cd "{root}/rank$HOROVOD_RANK" && {prefix} "{sys.executable}" "{REPO / "train.py"}" {" ".join(args)}'
    started = time.monotonic()
    result = subprocess.run([str(horovodrun), "-np", str(ranks), "-H", f"localhost:{ranks}", "--gloo",
                             "sh", "-c", script],
                            cwd=REPO, env={**JOB_ENV, **(env or {})}, capture_output=True, text=True, timeout=300, check=False)
    return result, time.monotonic() - started


def signal_rank_1_after_first_epoch(signal: str) -> str:
    """A :func:`launch` prefix: once rank 0 has written its first ``log.csv`` row, rank 1 writes the
    time to ``rank1/signalled`` and sends itself ``SIG<signal>``."""
    return (f'if [ "$HOROVOD_RANK" = 1 ]; then (until [ -s ../rank0/out/log.csv ]; do sleep 0.2; done; '
            f'date +%s.%N > signalled; kill -{signal} $$) & fi; exec')


def output_tail(result: subprocess.CompletedProcess) -> str:
    return result.stdout[-3000:] + result.stderr[-3000:]
