"""Facts about the installed stack that ``tfnhr info`` reports without importing it: package
versions from their metadata, Keras' backend from its settings, usable cores and NVIDIA GPUs
from the system. TensorFlow-free and fast (milliseconds)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

NOT_INSTALLED = "not installed"


def version(*distributions: str) -> str:
    """The version of the first of ``distributions`` that is installed (e.g. ``"tensorflow-cpu",
    "tensorflow"``); :data:`NOT_INSTALLED` if none is."""
    for name in distributions:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return NOT_INSTALLED


def keras_backend() -> str:
    """The backend Keras 3 will use: ``KERAS_BACKEND``, else ``backend`` in
    ``$KERAS_HOME/keras.json`` (default ``~/.keras``), else ``tensorflow``."""
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"]
    settings = Path(os.environ.get("KERAS_HOME", Path.home() / ".keras"), "keras.json")
    try:
        return json.loads(settings.read_text()).get("backend", "tensorflow")
    except (OSError, ValueError, AttributeError):
        return "tensorflow"


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity, e.g. under ``taskset``)."""
    return len(os.sched_getaffinity(0))


def nvidia_gpus() -> str:
    """The NVIDIA GPUs ``nvidia-smi -L`` lists, comma-separated; ``"none found"`` without the
    tool or GPUs."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return "none found (no nvidia-smi)"
    try:
        listed = subprocess.run([tool, "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "none found (nvidia-smi failed)"
    names = [line.split(" (UUID")[0] for line in listed.splitlines() if line.startswith("GPU ")]
    return ", ".join(names) or "none found"
