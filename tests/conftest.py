"""Shared test fixtures: paths of the repo and of the venv the tests run in."""

from __future__ import annotations

import os
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
def horovodrun() -> Path:
    """The venv's ``horovodrun`` launcher."""
    path = VENV_BIN / "horovodrun"
    if not path.exists():
        pytest.fail(f"{path} missing: run scripts/setup.sh (it builds Horovod)")
    return path
