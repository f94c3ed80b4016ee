"""Where the tests run: the repository, the venv's programs, the logical CPU devices."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
"""The repository root."""

VENV_BIN = Path(sys.executable).parent
"""The folder of the venv's programs (``horovodrun``, ``tfnhr``, ...)."""

LOGICAL_CPUS = 4
"""Logical CPU devices that ``tests/conftest.py`` makes, so lane placement runs on a CPU-only host."""
