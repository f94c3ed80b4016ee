"""Shared test fixtures: paths of the repo and of the venv the tests run in."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Keep TensorFlow quiet on the 2-core CI machines: set before its import, which logs its C++ info lines.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from tests.helpers.environment import LOGICAL_CPUS, REPO, VENV_BIN  # noqa: E402

# Four logical CPU devices (LOGICAL_CPUS), so lane placement (capsnet) runs and is tested on a CPU-only host.
# This must happen before TensorFlow initialises its runtime, hence here at conftest import.
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * LOGICAL_CPUS
)


@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository root."""
    return REPO


@pytest.fixture(scope="session")
def horovodrun_console_script() -> Path:
    """The venv's ``horovodrun`` console script, as users start it."""
    path = VENV_BIN / "horovodrun"
    if not path.exists():
        pytest.fail(f"{path} missing: run scripts/setup.sh (it builds Horovod)")
    return path


@pytest.fixture(scope="session")
def horovodrun(horovodrun_console_script, tmp_path_factory) -> Path:
    """The jobs' ``horovodrun``: Horovod's own launcher (``horovod.runner.launch.run_commandline``),
    with the answers of its build check (are Gloo and MPI built?) asked once per test process here
    instead of at every launch, where each asks costs a fresh TensorFlow import (~3.5 s of CPU).
    ``tests/project/test_stack.py`` runs the console script itself, build check included."""
    import horovod.tensorflow as hvd

    built = {"gloo": bool(hvd.gloo_built()), "mpi": bool(hvd.mpi_built())}
    path = tmp_path_factory.mktemp("launcher") / "horovodrun"
    path.write_text(f"#!{sys.executable}\n"
                    "import sys\n"
                    "from horovod.runner import launch\n"
                    f"launch.gloo_built = lambda verbose=False: {built['gloo']}\n"
                    f"launch.mpi_built = lambda verbose=False: {built['mpi']}\n"
                    "if __name__ == '__main__':\n"
                    "    sys.exit(launch.run_commandline())\n")
    path.chmod(0o755)
    return path
