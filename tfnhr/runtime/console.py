"""What a command-line run prints besides its own output: TensorFlow's C++ log lines and Python
warnings. TensorFlow-free (it must act before TensorFlow is imported).

:func:`quiet_libraries` is called by the command lines (never by library code) before any
TensorFlow import: without ``--verbose``, TensorFlow's C++ logging is off and every warning is
one line ``PROG: warning: MESSAGE`` on stderr.
"""

from __future__ import annotations

import logging
import os
import warnings

TF_LOG_LEVEL = "TF_CPP_MIN_LOG_LEVEL"
"""TensorFlow's C++ log threshold (0 all, 1 no INFO, 2 no WARNING, 3 no ERROR), read once when
TensorFlow is imported."""


def quiet_libraries(program: str, verbose: bool = False) -> None:
    """Unless ``verbose``: TensorFlow's C++ log lines off (unless the user set
    :data:`TF_LOG_LEVEL` already), TensorFlow's and absl's Python loggers at ERROR, and Python
    warnings printed as ``PROG: warning: MESSAGE`` (one line, no source line). ``program``:
    e.g. ``"tfnhr train"``."""
    if verbose:
        return
    os.environ.setdefault(TF_LOG_LEVEL, "3")
    for name in ("tensorflow", "absl", "h5py"):
        logging.getLogger(name).setLevel(logging.ERROR)

    def one_line(message, category, filename, lineno, line=None) -> str:
        return f"{program}: warning: {' '.join(str(message).split())}\n"

    warnings.formatwarning = one_line
