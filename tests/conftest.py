"""Shared test fixtures: paths of the repo and of the venv the tests run in."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import tensorflow as tf

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent

# Keep TensorFlow quiet and small on the 2-core CI machines.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Four logical CPU devices, so lane placement (capsnet) runs and is tested on a CPU-only host.
# This must happen before TensorFlow initialises its runtime, hence here at conftest import.
LOGICAL_CPUS = 4
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * LOGICAL_CPUS
)


def ragged_stack(images) -> tf.RaggedTensor:
    """``[H, W, C]`` arrays -> ragged ``[B, (H), (W), C]`` by ``tf.ragged.stack`` (independent of
    the library's own batching code)."""
    return tf.ragged.stack([tf.RaggedTensor.from_tensor(tf.constant(x)) for x in images])


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
