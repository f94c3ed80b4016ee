"""The training recipe of :func:`tfnhr.training.train` as a whole: the blank-phase diagnosis, the
validation rounds, and a regression run on a generated task where the paper's halving rule
collapses (it halves through CTC's blank phase and never learns) while the default recipe learns."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfnhr.data import digit_strings
from tfnhr.data.hdf5 import TextImageWriter
from tfnhr.training import TrainOptions, train
from tfnhr.training.loop import BLANK_PHASE_CER, blank_phase_collapse


def test_blank_phase_collapse_needs_a_stuck_cer_and_a_falling_loss():
    stuck = {"loss": [90.0, 40.0, 30.0, 25.0], "val_cer": [0.88, 0.995, 1.0, 0.99]}
    message = blank_phase_collapse(stuck)
    assert message is not None and "99.0%" in message and "90 to 25" in message
    assert blank_phase_collapse({**stuck, "val_cer": [0.88, 0.995, 0.6, 0.99]}) is None  # it read once
    assert blank_phase_collapse({**stuck, "loss": [90.0, 88.0, 80.0, 70.0]}) is None  # loss barely fell
    assert blank_phase_collapse({"loss": [90.0, 20.0], "val_cer": [1.0, 1.0]}) is None  # too short to tell
    assert blank_phase_collapse({}) is None
    assert BLANK_PHASE_CER == 0.9


def _digit_set(path, seed=0):
    """The embedded 3x5-bitmap digit strings (1..5 digits, scales 1..3) as an HDF5 text-image file:
    300 training and 40 validation lines."""
    with TextImageWriter(path, source="digit strings") as writer:
        for subset, count, offset in (("train", 300, 0), ("val", 40, 1)):
            data = digit_strings.generate(count, seed=seed + offset, max_digits=5)
            for index, (image, text) in enumerate(zip(data.images, data.texts)):
                writer.add(subset, f"{subset}-{index}", text, np.round(255 * (1 - image[..., 0])).astype(np.uint8))
        writer.close()
    return path


def _train(tmp_path, name, epochs, **recipe):
    """A tiny recognizer trained on the digit strings, validated on 20 lines every 15 updates
    (about 6 times per epoch), no augmentation; returns the summary and the log's rows."""
    options = TrainOptions(data=tmp_path / "digits.h5", out=tmp_path / name, mdlstm_units=(2, 6, 16),
                           conv_filters=(4, 8), block=((2, 2), (2, 2)), height=16, batch_pixels=3000, epochs=epochs,
                           validate_every=15, max_val=20, augment="none", verbose=0, **recipe)
    summary = train(options)
    log = (tmp_path / name / "log.csv").read_text().splitlines()
    return summary, log


@pytest.mark.slow
def test_the_default_recipe_learns_where_the_papers_rule_collapses(tmp_path):
    _digit_set(tmp_path / "digits.h5")
    # The blank phase lasts about 250 updates (17 validations); by then the paper's rule has halved
    # the rate 6 times or more, back to the first validation's weights each time.
    papers, papers_log = _train(tmp_path, "papers-rule", epochs=3, halve_start=None, halve_patience=1)
    ours, ours_log = _train(tmp_path, "recipe", epochs=6)
    assert len(papers["halvings"]) >= 3, papers_log  # halved through the blank phase ...
    assert papers["best_val_cer"] >= BLANK_PHASE_CER and papers["collapsed"], papers_log  # ... and never read
    assert ours["best_val_cer"] < 0.5 and not ours["collapsed"], ours_log
    assert json.loads((tmp_path / "recipe" / "summary.json").read_text())["collapsed"] is False
