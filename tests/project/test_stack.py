"""The installed stack: imports, pinned versions, what Horovod was built with, real collectives."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tfnhr.runtime.horovod_build import check_build
from tests.helpers.environment import REPO

JSON_REPORT = re.compile(r'\{"rank".*?\}\}')


def test_packages_import_with_pinned_stack():
    import capsnet  # noqa: F401
    import horovod.tensorflow as hvd
    import horovod_jobs  # noqa: F401
    import keras
    import tensorflow as tf

    import tfnhr

    assert tf.__version__ == "2.18.1"
    assert keras.__version__.startswith("3.")
    assert keras.backend.backend() == "tensorflow"
    assert hvd.__name__ == "horovod.tensorflow"
    assert tfnhr.__version__


@pytest.fixture(scope="module")
def horovod_build() -> dict[str, list[str]]:
    """What Horovod was built with, asked once for this module."""
    return check_build()


def launcher_check_build(horovodrun) -> dict[str, list[str]]:
    """``horovodrun --check-build``'s own answer (~20 s), parsed: the names marked ``[X]`` per section."""
    out = subprocess.run([str(horovodrun), "--check-build"], capture_output=True, text=True, check=True).stdout
    sections = {"Available Frameworks": "frameworks", "Available Controllers": "controllers",
                "Available Tensor Operations": "tensor_operations"}
    marked: dict[str, list[str]] = {key: [] for key in sections.values()}
    section = None
    for line in out.splitlines():
        if line.strip().rstrip(":") in sections:
            section = sections[line.strip().rstrip(":")]
        elif section and "[X]" in line:
            marked[section].append(line.split("]", 1)[1].strip())
    return marked


@pytest.mark.subprocess
@pytest.mark.slow
def test_check_build_answers_as_the_launcher_does(horovod_build, horovodrun_console_script):
    """The same controllers and tensor operations as ``horovodrun --check-build``; its frameworks
    less those whose extension was never built (it marks PyTorch whenever PyTorch imports)."""
    launcher = launcher_check_build(horovodrun_console_script)
    assert horovod_build["controllers"] == launcher["controllers"]
    assert horovod_build["tensor_operations"] == launcher["tensor_operations"]
    assert set(horovod_build["frameworks"]) <= set(launcher["frameworks"])
    assert horovod_build["frameworks"] == ["TensorFlow"]
    assert "Gloo" in horovod_build["controllers"]
    if shutil.which("mpirun") and shutil.which("mpicxx"):
        assert "MPI" in horovod_build["controllers"], "Open MPI is installed, so the set-up must build Horovod with MPI"


def run_smoke(command: list[str], size: int) -> list[dict]:
    """Run the collectives smoke job; returns each rank's JSON report (asserts a clean exit)."""
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(command + [sys.executable, "-m", "horovod_jobs.smoke"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # MPI may interleave the ranks' output prefixes with the JSON, so find the objects themselves.
    reports = [json.loads(match) for match in JSON_REPORT.findall(result.stdout)]
    assert sorted(r["rank"] for r in reports) == list(range(size)), result.stdout
    return reports


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_two_gloo_workers_allreduce_to_closed_form(horovodrun_console_script):
    reports = run_smoke([str(horovodrun_console_script), "-np", "2", "-H", "localhost:2", "--gloo"], size=2)
    for report in reports:
        assert report["size"] == 2
        assert report["ok"], report["checks"]


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_two_mpi_workers_allreduce_to_closed_form(horovodrun, horovod_build):
    if "MPI" not in horovod_build["controllers"]:
        pytest.skip("Horovod built without MPI (no Open MPI on this machine)")
    mpi_args = "--oversubscribe" + (" --allow-run-as-root" if os.geteuid() == 0 else "")
    reports = run_smoke([str(horovodrun), "-np", "2", "-H", "localhost:2", "--mpi", f"--mpi-args={mpi_args}"],
                        size=2)
    assert all(report["ok"] for report in reports), reports


@pytest.mark.subprocess
@pytest.mark.slow
def test_cli_info_reports_the_stack():
    out = subprocess.run([sys.executable, "-m", "tfnhr.cli", "info"], capture_output=True, text=True,
                         check=True, cwd=REPO).stdout
    assert "2.18.1" in out
    assert "TensorFlow" in out.split("horovod:", 1)[1]


HIDE_HOROVOD = """
import sys
sys.modules["horovod"] = None  # as if not installed: imports fail, find_spec finds nothing
from tfnhr.cli import main
sys.exit(main(["info"]))
"""


@pytest.mark.subprocess
@pytest.mark.slow
def test_cli_info_works_without_horovod():
    """Single-process code never needs the optional distributed package."""
    result = subprocess.run([sys.executable, "-c", HIDE_HOROVOD], capture_output=True, text=True, cwd=REPO, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "horovod:" in result.stdout and result.stdout.split("horovod:", 1)[1].strip() == "not installed"
