"""scripts/setup.sh: clear one-line failures on bad input, and a second run that rebuilds nothing."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.environment import REPO

pytestmark = pytest.mark.subprocess  # every test runs scripts/setup.sh

SETUP = REPO / "scripts" / "setup.sh"


def run_setup(env_overrides: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, **env_overrides)
    return subprocess.run([str(SETUP)], env=env, capture_output=True, text=True, timeout=timeout, check=False)


def find_python39() -> str | None:
    found = shutil.which("python3.9")
    if found and subprocess.run([found, "-V"], capture_output=True, check=False).returncode == 0:
        return found
    candidates = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.9*/bin/python3.9")))
    return candidates[0] if candidates else None


def test_python_39_is_refused_with_one_line(tmp_path: Path):
    python39 = find_python39()
    if python39 is None:
        pytest.skip("no Python 3.9 interpreter on this machine")
    result = run_setup({"PYTHON": python39, "TFNHR_VENV": str(tmp_path / "venv")})
    assert result.returncode != 0
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert "Python 3.9 is not supported" in result.stderr
    assert not (tmp_path / "venv").exists(), "nothing may be created before the checks pass"


def test_missing_compiler_is_refused_before_any_work(tmp_path: Path):
    result = run_setup({"TFNHR_VENV": str(tmp_path / "venv"), "CXX": str(tmp_path / "no-such-g++"),
                        "TFNHR_WITH_MPI": "0"})
    assert result.returncode != 0
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert "no C++ compiler" in result.stderr
    assert not (tmp_path / "venv").exists()


def test_unknown_tensorflow_variant_is_refused(tmp_path: Path):
    result = run_setup({"TFNHR_VENV": str(tmp_path / "venv"), "TFNHR_TF": "rocm"})
    assert result.returncode != 0
    assert "TFNHR_TF must be cpu or cuda" in result.stderr


def horovod_libraries(venv: Path) -> dict[Path, int]:
    """Horovod's compiled TensorFlow ops in the venv -> modification time (ns)."""
    libs = list(venv.glob("lib/python3*/site-packages/horovod/tensorflow/mpi_lib*.so"))
    return {lib: lib.stat().st_mtime_ns for lib in libs}


@pytest.mark.slow
def test_second_run_skips_every_stage():
    venv = Path(sys.executable).parent.parent
    if not (venv / ".tfnhr-horovod").exists():
        pytest.skip(f"{venv} was not made by scripts/setup.sh")
    before = horovod_libraries(venv)
    assert before, "Horovod's TensorFlow library is missing from the venv"
    result = run_setup({"TFNHR_VENV": str(venv)})
    assert result.returncode == 0, result.stderr
    assert "pinned stack already installed" in result.stdout
    assert "already built" in result.stdout
    assert "building" not in result.stdout and "installing" not in result.stdout
    assert horovod_libraries(venv) == before
