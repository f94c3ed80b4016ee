"""``scripts/gpu_check.sh`` in CPU mode (what CI runs so that the GPU check cannot rot): every
section measured, rates consistent with the sizes measured, and a missing venv named in one line."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.helpers.environment import REPO, VENV_BIN

SCRIPT = REPO / "scripts" / "gpu_check.sh"


@pytest.mark.slow
@pytest.mark.subprocess
def test_quick_check_runs_every_section_on_the_cpu(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TFNHR_VENV": str(VENV_BIN.parent)}  # the venv running the tests
    result = subprocess.run([str(SCRIPT), "--quick", "--repeats", "1", "--threads", "1", "--out", str(tmp_path / "r.json")],
                            capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["devices"]["gpus"] == [] and report["devices"]["cpus"]
    mdlstm = {key: value for key, value in report.items() if key.startswith("mdlstm ")}
    assert sorted(mdlstm) == [f"mdlstm L{n} /CPU:0" for n in range(1, 5)]
    for value in mdlstm.values():
        batch, height, width, _, _ = value["config"]
        assert width <= 32  # --quick cuts the layers
        assert value["cell_updates_per_s"] == pytest.approx(batch * 4 * height * width / (value["ms"] / 1e3))
    training = {key: value for key, value in report.items() if key.startswith("train ")}
    assert sorted(training) == sorted(f"train small {packing} {precision} /CPU:0"
                                      for packing in ("examples", "pad") for precision in ("float32", "mixed"))
    assert {value["policy"] for value in training.values()} == {"float32", "mixed_bfloat16"}
    assert all(value["lines_per_s"] > 0 for value in training.values())
    serving = report["serving"]
    assert serving["batch_1"]["p50_ms"] > 0 and serving["batch_16"]["p50_ms"] > 0
    assert "recognize signature: 1 line p50" in result.stdout


def test_without_a_venv_it_says_so_in_one_line(tmp_path):
    result = subprocess.run([str(SCRIPT), "--quick"], capture_output=True, text=True,
                            env={**os.environ, "TFNHR_VENV": str(tmp_path / "none")}, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"gpu_check: no virtualenv at {tmp_path / 'none'}: run 'make setup' (on a GPU host: TFNHR_TF=cuda make setup)"]
