"""What the installed Horovod was built with, read from ``horovodrun --check-build``; works
without Horovod (``tfnhr info`` then says "horovod: not installed").

Horovod 0.28.1's check marks PyTorch as available whenever ``import horovod.torch`` succeeds, and
that import only warns when the PyTorch extension was never built; so a framework counts here only
when its compiled extension library is present too.

Run ``python -m tfnhr.horovod_build`` for a one-line summary.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from tfnhr.stack import NOT_INSTALLED

# Section heading in --check-build output -> our key.
SECTIONS = {
    "Available Frameworks": "frameworks",
    "Available Controllers": "controllers",
    "Available Tensor Operations": "tensor_operations",
}
# Framework name -> package of its compiled extension inside horovod/.
FRAMEWORK_PACKAGES = {"TensorFlow": "tensorflow", "PyTorch": "torch", "MXNet": "mxnet"}


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


def check_build(horovodrun: Path | None = None) -> dict[str, list[str]]:
    """Parse ``horovodrun --check-build``.

    Returns:
      ``{"frameworks": [...], "controllers": [...], "tensor_operations": [...]}``, each the names
      marked ``[X]`` (frameworks filtered by :func:`extension_built`).
    """
    launcher = horovodrun or Path(sys.executable).with_name("horovodrun")
    out = subprocess.run([str(launcher), "--check-build"], capture_output=True, text=True, check=True).stdout
    marked: dict[str, list[str]] = {key: [] for key in SECTIONS.values()}
    section = None
    for line in out.splitlines():
        heading = line.strip().rstrip(":")
        if heading in SECTIONS:
            section = SECTIONS[heading]
        elif section and "[X]" in line:
            marked[section].append(line.split("]", 1)[1].strip())
    marked["frameworks"] = [name for name in marked["frameworks"] if extension_built(name)]
    return marked


def summary(build: dict[str, list[str]] | None) -> str:
    """One line, e.g. ``"frameworks: TensorFlow; controllers: MPI, Gloo"`` (``None``:
    :data:`NOT_INSTALLED`)."""
    if build is None:
        return NOT_INSTALLED
    return f"frameworks: {', '.join(build['frameworks'])}; controllers: {', '.join(build['controllers'])}"


if __name__ == "__main__":
    print(summary(check_build() if installed() else None))
