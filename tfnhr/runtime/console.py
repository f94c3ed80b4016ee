"""What a command-line run prints besides its own output: TensorFlow's and XLA's C++ log lines
and Python warnings. TensorFlow-free (it must act before TensorFlow is imported).

:func:`quiet_libraries` is called by the command lines (never by library code) before any
TensorFlow import: without ``--verbose``, TensorFlow's C++ logging is off, XLA's INFO and WARNING
lines are dropped from stderr (:func:`drop_native_log_lines`) and every warning is one line
``PROG: warning: MESSAGE`` on stderr.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import sys
import threading
import warnings

TF_LOG_LEVEL = "TF_CPP_MIN_LOG_LEVEL"
"""TensorFlow's C++ log threshold (0 all, 1 no INFO, 2 no WARNING, 3 no ERROR), read once when
TensorFlow is imported."""


def quiet_libraries(program: str, verbose: bool = False) -> None:
    """Unless ``verbose``: TensorFlow's C++ log lines off (unless the user set
    :data:`TF_LOG_LEVEL` already; XLA's dropped too unless it is 0), TensorFlow's and absl's
    Python loggers at ERROR, and Python
    warnings printed as ``PROG: warning: MESSAGE`` (one line, no source line). ``program``:
    e.g. ``"tfnhr train"``."""
    if verbose:
        return
    os.environ.setdefault(TF_LOG_LEVEL, "3")
    if os.environ[TF_LOG_LEVEL] != "0":
        drop_native_log_lines()
    for name in ("tensorflow", "absl", "h5py"):
        logging.getLogger(name).setLevel(logging.ERROR)

    def one_line(message, category, filename, lineno, line=None) -> str:
        return f"{program}: warning: {' '.join(str(message).split())}\n"

    warnings.formatwarning = one_line


NATIVE_LOG_LINE = re.compile(rb"(WARNING: All log messages before absl::InitializeLog\(\) is called are written"
                             rb" to STDERR|[IW]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [\w.]+:\d+\] )")
"""An INFO or WARNING line of absl's C++ logging, which XLA uses directly: ``I0000 00:00:... 123
service.cc:148] XLA service ... initialized``, and absl's notice before its first line.
:data:`TF_LOG_LEVEL` does not reach them (XLA's absl is linked into TensorFlow's Python extension,
its log level out of reach)."""

_LINE_STARTS = (b"I", b"W")


def drop_native_log_lines() -> None:
    """Route this process's file descriptor 2 (and its children's) through a thread that drops
    :data:`NATIVE_LOG_LINE` lines and passes everything else on unchanged, as it arrives. Undone
    at exit (what is still in the pipe is passed on first)."""
    if getattr(drop_native_log_lines, "active", False):
        return
    sys.stderr.flush()
    terminal = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def forward() -> None:
        pending = b""
        while chunk := os.read(read_end, 65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            kept = b"".join(line + b"\n" for line in lines if not NATIVE_LOG_LINE.match(line))
            if pending and not pending.startswith(_LINE_STARTS):  # a partial line that cannot be a log line
                kept, pending = kept + pending, b""
            _write_all(terminal, kept)
        _write_all(terminal, pending)

    thread = threading.Thread(target=forward, name="native-stderr-filter", daemon=True)
    thread.start()

    def restore() -> None:
        sys.stderr.flush()
        os.dup2(terminal, 2)  # this process's write end closes: the thread sees the end once children let go
        thread.join(timeout=2)

    atexit.register(restore)
    drop_native_log_lines.active = True


def _write_all(fd: int, data: bytes) -> None:
    """``data`` written whole to ``fd`` (``os.write`` may take only a part)."""
    while data:
        data = data[os.write(fd, data):]
