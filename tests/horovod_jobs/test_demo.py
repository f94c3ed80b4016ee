"""``make demo-horovod`` under real Horovod: 2 Gloo workers train the MDLSTM digit reader."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers.environment import REPO

pytestmark = [pytest.mark.horovod, pytest.mark.subprocess, pytest.mark.slow]


def test_demo_trains_in_sync_on_two_workers(horovodrun, tmp_path):
    command = [str(horovodrun), "-np", "2", "-H", "localhost:2", "--gloo", sys.executable, "-m",
               "horovod_jobs.demo", "--epochs", "3", "--train", "128", "--val", "16", "--batch", "8",
               "--out", str(tmp_path)]
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((tmp_path / "demo.json").read_text())
    assert report["workers"] == 2
    assert report["weights_identical_on_all_ranks"] is True
    losses = [epoch["loss"] for epoch in report["history"]]
    assert len(losses) == 3 and losses[-1] < losses[0], losses
    assert "epoch  3/3" in result.stdout
