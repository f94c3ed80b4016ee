"""The main job (``make demo`` = ``python -m tfnhr.main_job``) end to end on a tiny set, as a real process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tfnhr.models import load_recognizer

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]


def test_main_job_trains_and_reports_greedy_and_lm_error_rates(tmp_path):
    out = tmp_path / "main"
    result = subprocess.run(
        [sys.executable, "-m", "tfnhr.main_job", "--out", str(out), "--train", "16", "--val", "4",
         "--test", "4", "--time-limit", "0"],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    for step in ("[1/4]", "[2/4]", "[3/4]", "[4/4]", "model saved at", "  ref:  ", "  read: "):
        assert step in result.stdout
    for picture in (out / "samples.png", out / "model" / "curves.png"):
        assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 5000
    report = json.loads((out / "main.json").read_text())
    assert report["training"]["epochs_run"] == 1 and report["training"]["stopped_by_time_limit"]
    assert report["training"]["train_examples"] + report["training"]["val_examples"] <= 20
    for subset in ("val", "test"):
        assert [row["decoder"] for row in report[subset]] == ["greedy", "beam+lm"]
        assert all(row["cer"] >= 0 and row["wer"] >= 0 for row in report[subset])
    assert report["val"][0]["cer"] == report["training"]["best_val_cer"]  # the same model, data, decoder
    model = load_recognizer(out / "model" / "best.keras")
    assert model.mdlstm_units == (2, 10, 50) and model.input_height == 32
    assert "\\data\\" in (out / "lm.arpa").read_text()[:200]
