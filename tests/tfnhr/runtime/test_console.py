"""tfnhr.runtime.console in fresh processes: XLA's absl lines dropped from a quiet command's
stderr, everything else passed on unchanged; ``--verbose`` (no quieting) keeps them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers.environment import REPO

JIT_ONCE = ("import tensorflow as tf\n"
            "tf.function(lambda x: x + 1, jit_compile=True)(tf.constant(1.0))\n")
"""The first XLA compilation of a process: XLA's service logs its start through absl."""


def _stderr(script: str) -> str:
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, env={**env, "PYTHONPATH": str(REPO)},
                            capture_output=True, text=True, timeout=120, check=True)
    return result.stderr


@pytest.mark.subprocess
@pytest.mark.parametrize("verbose", [False, True])
def test_xla_start_up_lines_are_dropped_unless_verbose(verbose):
    err = _stderr(f"from tfnhr.runtime.console import quiet_libraries\nquiet_libraries('x', {verbose})\n" + JIT_ONCE)
    if verbose:
        assert "XLA service" in err and "absl::InitializeLog" in err  # what a quiet run would show
    else:
        assert err == ""


@pytest.mark.subprocess
def test_other_stderr_output_passes_unchanged_and_in_order():
    script = ("import os, sys\n"
              "from tfnhr.runtime.console import drop_native_log_lines\n"
              "drop_native_log_lines()\n"
              "os.write(2, b'first line\\nI0000 00:00:1796695951.614896   26278 service.cc:148] XLA service\\n')\n"
              "os.write(2, b'W0000 00:00:1796695951.6 26278 loader.cc:9] dropped\\nIn')\n"  # a line in two writes
              "os.write(2, b'complete\\nE0000 00:00:17.5 1 x.cc:1] an error stays\\n')\n"
              "print('python warning', file=sys.stderr)\n"
              "os.write(2, b'no newline at the end')\n")
    assert _stderr(script) == ("first line\nIncomplete\nE0000 00:00:17.5 1 x.cc:1] an error stays\n"
                               "python warning\nno newline at the end")
