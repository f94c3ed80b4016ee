"""horovod_jobs.launcher_stop in a real process: SIGTERM while the main thread is busy ends the
process with the one line and status 143."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.helpers.environment import REPO

BUSY_WORKER = """
import sys, threading
from horovod_jobs.launcher_stop import report_launcher_stop
report_launcher_stop("job: rank 0 stopped by the launcher:   another rank ended first")
print("ready", flush=True)
threading.Event().wait()  # blocked, as a rank waiting in a collective
"""


def ready_worker(script: str) -> subprocess.Popen:
    """``script`` running in its own Python, once it has printed ``ready``."""
    worker = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    assert worker.stdout.readline() == "ready\n"
    return worker


@pytest.mark.subprocess
def test_sigterm_ends_a_busy_worker_with_one_line():
    worker = ready_worker(BUSY_WORKER)
    worker.send_signal(signal.SIGTERM)
    _, err = worker.communicate(timeout=30)
    assert worker.returncode == 143
    assert err == "job: rank 0 stopped by the launcher: another rank ended first\n"


OTHER_HANDLER = BUSY_WORKER.replace("print(", "signal.signal(signal.SIGUSR1, lambda *_: sys.exit(7))\nprint(").replace(
    "import sys, threading", "import signal, sys, threading")


@pytest.mark.subprocess
def test_other_signals_keep_their_handling():
    worker = ready_worker(OTHER_HANDLER)
    worker.send_signal(signal.SIGUSR1)
    _, err = worker.communicate(timeout=30)
    assert worker.returncode == 7 and err == ""
