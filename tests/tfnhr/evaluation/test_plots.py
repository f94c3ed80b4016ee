"""``curves.png`` and ``samples.png`` (:mod:`tfnhr.evaluation.plots`): the log is read back as written, the
pictures are real PNGs of the documented size, and empty or mismatched input is handled."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from PIL import Image

from tfnhr.evaluation.plots import plot_curves, plot_samples, read_log


def _write_log(path, rows):
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_curves_of_a_training_log(tmp_path):
    rows = [{"epoch": e, "learning_rate": 0.005 if e < 3 else 0.0025, "loss": 100.0 / (e + 1),
             "val_cer": 0.9 - 0.1 * e, "val_wer": 1.0 - 0.05 * e} for e in range(5)]
    _write_log(tmp_path / "log.csv", rows)
    log = read_log(tmp_path / "log.csv")
    assert log["epoch"] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert log["val_cer"] == pytest.approx([row["val_cer"] for row in rows])
    out = plot_curves(tmp_path / "log.csv", tmp_path / "curves.png", title="test run")
    with Image.open(out) as picture:
        assert picture.format == "PNG" and picture.size == (700, 400)
        pixels = np.asarray(picture.convert("RGB"))
    assert (pixels.std(axis=(0, 1)) > 10).all()  # drawn, not blank


def test_curves_of_no_log_are_none(tmp_path):
    assert read_log(tmp_path / "missing.csv") == {}
    (tmp_path / "log.csv").write_text("epoch,loss,val_cer\n")
    assert plot_curves(tmp_path / "log.csv", tmp_path / "curves.png") is None
    assert not (tmp_path / "curves.png").exists()


def test_samples_show_every_line(tmp_path):
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (32, width), dtype=np.uint8) for width in (200, 120, 260)]
    out = plot_samples(images, ["a b", "cd", "ef g"], ["a b", "cb", ""], tmp_path / "samples.png", [0.0, 0.5, 1.0])
    with Image.open(out) as picture:
        width, height = picture.size
    assert height == 125 * 3 and width >= 400
    with pytest.raises(ValueError, match="as many"):
        plot_samples(images, ["a"], ["a"], tmp_path / "bad.png")
    with pytest.raises(ValueError, match="at least one"):
        plot_samples([], [], [], tmp_path / "bad.png")
