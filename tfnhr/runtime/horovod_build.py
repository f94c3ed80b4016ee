"""What the installed Horovod was built with, asked of its TensorFlow library in a separate
interpreter (this process stays free of TensorFlow); works without Horovod (``tfnhr info`` then
says "horovod: not installed").

``horovodrun --check-build`` answers the same but takes ~20 s: it imports every framework it
knows (PyTorch too) in turn. Its framework check also marks PyTorch whenever ``import
horovod.torch`` succeeds, which only warns when the PyTorch extension was never built; so a
framework counts here only when its compiled extension library is present.

Run ``python -m tfnhr.runtime.horovod_build`` for a one-line summary.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from tfnhr.runtime.stack import NOT_INSTALLED

# Framework name -> package of its compiled extension inside horovod/.
FRAMEWORK_PACKAGES = {"TensorFlow": "tensorflow", "PyTorch": "torch", "MXNet": "mxnet"}
CONTROLLERS = ("MPI", "Gloo")
"""Horovod's controllers, in ``horovodrun --check-build``'s order."""
TENSOR_OPERATIONS = ("NCCL", "DDL", "CCL", "MPI", "Gloo")
"""Horovod's tensor operations, in ``horovodrun --check-build``'s order."""

BUILD_QUERY = """
import json
import horovod.tensorflow as hvd
built = {"MPI": hvd.mpi_built(), "Gloo": hvd.gloo_built(), "NCCL": hvd.nccl_built(), "DDL": hvd.ddl_built(),
         "CCL": hvd.ccl_built()}
print(json.dumps({name: bool(value) for name, value in built.items()}))
"""
"""What :func:`check_build` runs: one JSON line, operation name -> built."""


def installed() -> bool:
    """Whether the ``horovod`` package can be imported."""
    return importlib.util.find_spec("horovod") is not None


def extension_built(framework: str) -> bool:
    """Whether Horovod's compiled library for ``framework`` exists in the installation."""
    package = Path(importlib.util.find_spec("horovod").origin).parent / FRAMEWORK_PACKAGES[framework]
    return any(package.glob("mpi_lib*.so"))


def built_frameworks() -> list[str]:
    """The frameworks whose Horovod extension library is installed (no import, no subprocess)."""
    return [name for name in FRAMEWORK_PACKAGES if extension_built(name)]


def check_build(python: Path | None = None) -> dict[str, list[str]]:
    """What Horovod was built with, asked of ``horovod.tensorflow`` by ``python`` (default: this
    interpreter) in a subprocess (~5 s: it imports TensorFlow).

    Returns:
      ``{"frameworks": [...], "controllers": [...], "tensor_operations": [...]}``: the frameworks
      of :func:`built_frameworks`, and the controllers and tensor operations built, as
      ``horovodrun --check-build`` lists them.
    """
    out = subprocess.run([str(python or sys.executable), "-c", BUILD_QUERY], capture_output=True, text=True,
                         check=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}).stdout
    built = json.loads(out.strip().splitlines()[-1])
    return {"frameworks": built_frameworks(), "controllers": [name for name in CONTROLLERS if built[name]],
            "tensor_operations": [name for name in TENSOR_OPERATIONS if built[name]]}


def summary(build: dict[str, list[str]] | None) -> str:
    """One line, e.g. ``"frameworks: TensorFlow; controllers: MPI, Gloo"`` (``None``:
    :data:`NOT_INSTALLED`)."""
    if build is None:
        return NOT_INSTALLED
    return f"frameworks: {', '.join(build['frameworks'])}; controllers: {', '.join(build['controllers'])}"


if __name__ == "__main__":
    print(summary(check_build() if installed() else None))
