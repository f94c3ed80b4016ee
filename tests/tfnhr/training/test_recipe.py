"""The training recipe of :func:`tfnhr.training.train` as a whole: the blank-phase diagnosis, the
validation rounds, the epochs' one input pipeline, and a regression run on a generated task with a
long CTC blank phase (where the paper's halving rule halves back to the untrained weights) that the
default recipe leaves."""

from __future__ import annotations

import itertools
import json
import warnings

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.digit_sets import digit_set
from tfnhr.charset import Charset
from tfnhr.data.synthetic import digit_strings
from tfnhr.data.dataset import batched_dataset
from tfnhr.data.formats.hdf5 import TextImageWriter
from tfnhr.data.samples import TextImageSet
from tfnhr.data.sources import load_data_subset
from tfnhr.data.spacing import median_spacing
from tfnhr.models import load_recognizer
from tfnhr.training import TrainingHooks, TrainOptions, train
from tfnhr.training.loop import BLANK_PHASE_CER, _rounds, blank_phase_collapse, model_name


def test_blank_phase_collapse_needs_a_stuck_cer_and_a_falling_loss():
    stuck = {"loss": [90.0, 40.0, 30.0, 25.0], "val_cer": [0.88, 0.995, 1.0, 0.99]}
    message = blank_phase_collapse(stuck)
    assert message is not None and "99.0%" in message and "90 to 25" in message
    assert blank_phase_collapse({**stuck, "val_cer": [0.88, 0.995, 0.6, 0.99]}) is None  # it read once
    assert blank_phase_collapse({**stuck, "loss": [90.0, 88.0, 80.0, 70.0]}) is None  # loss barely fell
    assert blank_phase_collapse({"loss": [90.0, 20.0], "val_cer": [1.0, 1.0]}) is None  # too short to tell
    assert blank_phase_collapse({}) is None
    assert BLANK_PHASE_CER == 0.9


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
def test_the_default_recipe_leaves_the_blank_phase_and_reads(tmp_path):
    """The run passes through CTC's blank phase (several validations at >= 90 % CER, where the
    paper's rule halves back to the first validation's weights: ``test_callbacks``'s
    ``test_the_papers_rule_halves_through_the_blank_phase`` replays such a run) and then reads."""
    digit_set(tmp_path / "digits.h5")
    ours, ours_log = _train(tmp_path, "recipe", epochs=6)
    cers = [float(row.split(",")[3]) for row in ours_log[1:]]
    assert sum(cer >= BLANK_PHASE_CER for cer in cers) >= 3, ours_log  # the blank phase was there ...
    assert ours["best_val_cer"] < 0.5 and not ours["collapsed"], ours_log  # ... and the model left it
    reads = next(index for index, cer in enumerate(cers) if cer < 0.5)
    assert all(halving > reads for halving in ours["halvings"]), ours_log  # no halving before it read
    assert json.loads((tmp_path / "recipe" / "summary.json").read_text())["collapsed"] is False


def test_epochs_run_from_one_repeated_pipeline(tmp_path):
    """Without ``validate_every`` an epoch of ``fit`` is one pass of a repeated dataset of known
    length (so ``fit`` keeps one iterator, and the next epoch's batches are planned and made
    while the last one ends): passes come in order, each epoch's plan once, every example once."""
    data = TextImageSet([np.full((4, 3 + i), 255, np.uint8) for i in range(6)], ["ab"] * 6, [f"x{i}" for i in range(6)])
    planned = []

    def epoch_batches(epoch):
        planned.append(epoch)
        return [[0, 1, 2], [3, 4, 5]] if epoch % 2 == 0 else [[5, 4], [3, 2, 1, 0]]

    dataset = batched_dataset(data, Charset.from_texts(data.texts), epoch_batches, first_epoch=3, steps=2)
    rounds = _rounds(dataset, TrainOptions(data=tmp_path, out=tmp_path, epochs=2), initial_epoch=0)
    assert (rounds["epochs"], rounds["steps"], rounds["what"]) == (2, 2, "epochs")
    batches = list(itertools.islice(iter(rounds["data"]), 4))
    widths = [sorted(int(image.to_tensor().shape[1]) for image in images) for images, _ in batches]
    assert widths == [[7, 8], [3, 4, 5, 6], [3, 4, 5], [6, 7, 8]]  # epoch 3's two batches, then epoch 4's
    assert planned[:2] == [3, 4]
    unknown = dataset.apply(tf.data.experimental.assert_cardinality(tf.data.UNKNOWN_CARDINALITY))
    assert _rounds(unknown, TrainOptions(data=tmp_path, out=tmp_path, epochs=2), 0)["steps"] is None


class _NotWriting(TrainingHooks):
    """A Horovod worker other than rank 0, as :func:`train` sees it."""

    writes = False


def _tiny_digit_lines(path):
    """24 digit-string lines (each in the training and the validation set) and one training line
    far too narrow for its 8 digits."""
    data = digit_strings.generate(24, seed=0, max_digits=3)
    with TextImageWriter(path, source="digit strings") as writer:
        for index, (image, text) in enumerate(zip(data.images, data.texts)):
            for subset in ("train", "val"):
                writer.add(subset, f"{subset}-{index}", text, np.round(255 * (1 - image[..., 0])).astype(np.uint8))
        writer.add("train", "narrow", "12345678", np.zeros((5, 4), np.uint8))  # 8 digits in 1 output column
        writer.close()
    return path


def _tiny_options(data, out, **options):
    return TrainOptions(**{"data": data, "out": out, "mdlstm_units": (2, 4, 4), "conv_filters": (4, 4),
                           "block": ((2, 2), (2, 2)), "height": 8, "batch_pixels": 4000, "epochs": 1,
                           "augment": "none", "verbose": 0, **options})


@pytest.mark.slow
def test_data_warnings_come_once_per_job_from_the_process_that_writes(tmp_path):
    """Every Horovod worker loads the same set; each counts the examples dropped as too narrow
    for their text, but only the process that writes the run warns about them."""
    data = _tiny_digit_lines(tmp_path / "digits.h5")
    summaries, caught = [], []
    for name, hooks in (("writer", TrainingHooks()), ("reader", _NotWriting())):
        with warnings.catch_warnings(record=True) as messages:
            warnings.simplefilter("always")
            summaries.append(train(_tiny_options(data, tmp_path / name), hooks))
        caught.append([str(m.message) for m in messages if "too narrow" in str(m.message)])
    assert [s["train_dropped_too_narrow"] for s in summaries] == [1, 1]
    assert [s["train_examples"] for s in summaries] == [24, 24]
    assert summaries[0]["stroke_spacing"] is None  # stroke-spacing normalization is off by default
    assert len(caught[0]) == 1 and "['narrow']" in caught[0][0]
    assert caught[1] == []
    assert not (tmp_path / "reader").exists() or not list((tmp_path / "reader").iterdir())


@pytest.mark.slow
def test_the_normalized_stroke_spacing_is_the_training_lines_median_and_stays_with_the_model(tmp_path):
    data = _tiny_digit_lines(tmp_path / "digits.h5")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the narrow line
        summary = train(_tiny_options(data, tmp_path / "run", normalize_spacing=True))
        resumed = train(_tiny_options(data, tmp_path / "run", epochs=2, resume=True))
    lines = load_data_subset(data, "train", height=8)
    assert summary["stroke_spacing"] == pytest.approx(median_spacing(lines.images))
    assert load_recognizer(tmp_path / "run" / "best.keras").stroke_spacing == summary["stroke_spacing"]
    assert resumed["stroke_spacing"] == summary["stroke_spacing"]  # a resumed run keeps its model's


def test_the_run_names_the_sizes_that_override_its_preset(tmp_path):
    assert model_name(TrainOptions(data=tmp_path)) == "small-wide"
    assert model_name(TrainOptions(data=tmp_path, preset="large", mdlstm_units=(4, 16, 50))) == "large, units (4, 16, 50)"
    assert (model_name(TrainOptions(data=tmp_path, mdlstm_units=(2, 4, 4), conv_filters=(4, 4)))
            == "small-wide, units (2, 4, 4), filters (4, 4)")
    assert model_name(TrainOptions(data=tmp_path, network={}, network_source="tiny.yaml")) == "tiny.yaml"
