"""A worker stopped by ``horovodrun`` says so in one line.

When one rank dies, ``horovodrun`` sends SIGTERM to the others at once, often while they wait in a
collective inside TensorFlow's C++ code, where a Python signal handler would not run before the
launcher's SIGKILL follows. Here the signal wakes a thread instead (through
:func:`signal.set_wakeup_fd`), which writes the line and ends the process with SIGTERM's status
(143), whatever the main thread is doing. A worker that says itself why it ends (its collective
failed first) says it through :meth:`LastWord.say`, and exactly one of the two lines is written.
"""

from __future__ import annotations

import os
import signal
import threading
import time

TERMINATED_STATUS = 128 + signal.SIGTERM
"""The exit status of a process ended by SIGTERM, as a shell reports it."""
FORWARDING_GRACE_S = 0.5
"""Seconds between the line and the exit: ``horovodrun`` stops forwarding a worker's output soon
after the worker ends, and without a pause the line was often lost (docs/lab/install-and-edges.md);
the launcher allows 5 s before its SIGKILL."""


class LastWord:
    """The one line a worker ends with: its own reason (:meth:`say`) or, on SIGTERM, the
    launcher's stop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._said = False

    def say(self, line: str) -> None:
        """Write ``line`` (one line, on stderr) unless a line was written already."""
        with self._lock:
            if not self._said:
                os.write(2, (" ".join(line.split()) + "\n").encode())
                self._said = True


def report_launcher_stop(message: str) -> LastWord:
    """From now on, SIGTERM ends this process with ``message`` (unless the returned
    :class:`LastWord` has said something already) and status :data:`TERMINATED_STATUS`. Call from
    the main thread; other signals keep their handling."""
    last_word = LastWord()
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, lambda signum, frame: None)  # the thread below acts

    def watch() -> None:
        while True:
            if signal.SIGTERM in os.read(read_end, 64):
                last_word.say(message)
                time.sleep(FORWARDING_GRACE_S)
                os._exit(TERMINATED_STATUS)

    threading.Thread(target=watch, name="launcher-stop", daemon=True).start()
    return last_word
