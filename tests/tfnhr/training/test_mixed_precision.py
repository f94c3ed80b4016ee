"""``TrainOptions(mixed_precision=True)`` / ``tfnhr train --mixed-precision``: the model computes in
bfloat16 on this CPU (float16 on a GPU), keeps float32 variables and MDLSTM recurrence, learns,
and saves and loads with its policy; the global Keras policy is left as it was."""

from __future__ import annotations

import csv
import json

import keras
import numpy as np
import pytest

from tests.helpers.digit_sets import digit_set
from tfnhr.recognition.transcriber import Transcriber
from tfnhr.layers import MDLSTM2D
from tfnhr.models import load_recognizer
from tfnhr.training import TrainOptions, train
from tfnhr.models.precision import dtype_policy, mixed_policy_name


def test_policy_applies_inside_and_is_restored():
    assert mixed_policy_name() == "mixed_bfloat16"  # the test machines have no GPU
    before = keras.config.dtype_policy().name
    with dtype_policy("mixed_bfloat16"):
        layer = MDLSTM2D(3)
    assert keras.config.dtype_policy().name == before
    assert (layer.compute_dtype, layer.variable_dtype) == ("bfloat16", "float32")
    with dtype_policy(None):
        assert keras.config.dtype_policy().name == before


@pytest.mark.slow
def test_mixed_precision_trains_saves_and_loads(tmp_path):
    digit_set(tmp_path / "digits.h5")
    options = TrainOptions(data=tmp_path / "digits.h5", out=tmp_path / "mixed", mdlstm_units=(2, 6, 16),
                           conv_filters=(4, 8), block=((2, 2), (2, 2)), height=16, batch_pixels=3000, epochs=4,
                           max_val=20, augment="none", verbose=0, mixed_precision=True)
    before = keras.config.dtype_policy().name
    train(options)
    assert keras.config.dtype_policy().name == before
    with open(tmp_path / "mixed" / "log.csv", newline="") as log:
        losses = [float(row["loss"]) for row in csv.DictReader(log)]
    assert losses[-1] < 0.7 * losses[0], losses  # it learns in bfloat16 (float32: 10.5 -> 5.8 in 4 epochs)
    model = load_recognizer(tmp_path / "mixed" / "last.keras")
    assert model.dtype_policy.name == "mixed_bfloat16"
    mdlstms = [layer for layer in model._flatten_layers() if isinstance(layer, MDLSTM2D)]
    assert mdlstms and all(layer.variable_dtype == "float32" and layer.compute_dtype == "bfloat16" for layer in mdlstms)
    assert all(weight.dtype == np.float32 for weight in model.get_weights())
    rng = np.random.default_rng(0)
    grays = [rng.integers(0, 256, (16, width)).astype(np.uint8) for width in (30, 47)]
    again = load_recognizer(tmp_path / "mixed" / "last.keras")
    for first, second in zip(Transcriber(model).scores(grays), Transcriber(again).scores(grays)):
        assert first.dtype == np.float32
        np.testing.assert_array_equal(first, second)
    assert json.loads((tmp_path / "mixed" / "summary.json").read_text())["epochs_run"] == 4


def test_train_flag_sets_the_option():
    from tfnhr.cli import build_parser
    from tfnhr.training import options_from_args

    parser = build_parser()
    assert options_from_args(parser.parse_args(["train", "--data", "d", "--mixed-precision"])).mixed_precision
    assert not options_from_args(parser.parse_args(["train", "--data", "d"])).mixed_precision
