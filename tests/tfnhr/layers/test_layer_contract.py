"""Every Keras layer of :mod:`tfnhr.layers` keeps the layer contract of
:func:`tests.helpers.layer_contract.check_layer` (config and ``.keras`` round trips, ragged vs
dense, mixed precision); a layer added without a case here fails :func:`test_every_layer_has_a_case`."""

from __future__ import annotations

import inspect

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfnhr.layers
from tests.helpers.layer_contract import check_layer
from tfnhr.layers import (BlockConv2D, CtcScores, DirectionSharedDense, MDLSTM2D, RaggedDropout, SameConv2D,
                          SequenceLSTM, SumOverHeight)

RNG = np.random.default_rng(0)


def images(sizes, channels):
    """Random ragged ``[B, (H), (W), C]`` float32 images of the given ``(H, W)`` sizes."""
    return tf.ragged.stack([tf.RaggedTensor.from_tensor(tf.constant(RNG.uniform(-1, 1, (h, w, channels)),
                                                                    tf.float32)) for h, w in sizes])


def equal_images(count, height, width, channels):
    """``count`` examples of one size, ragged and dense (the same values)."""
    dense = tf.constant(RNG.uniform(-1, 1, (count, height, width, channels)), tf.float32)
    return tf.RaggedTensor.from_tensor(dense, ragged_rank=2), dense


def sequences(lengths, channels):
    """Random ragged ``[B, (T), C]`` float32 sequences."""
    values = tf.constant(RNG.uniform(-1, 1, (sum(lengths), channels)), tf.float32)
    return tf.RaggedTensor.from_row_lengths(values, lengths)


VARIED = [(4, 6), (2, 3), (5, 5)]

CASES = {
    MDLSTM2D: dict(kwargs={"units": 3}, inputs=images(VARIED, 2), dense=equal_images(2, 3, 5, 2)),
    BlockConv2D: dict(kwargs={"filters": 4, "block": (2, 2), "activation": "tanh"}, inputs=images(VARIED, 3),
                      dense=equal_images(2, 4, 6, 3)),
    SameConv2D: dict(kwargs={"filters": 3, "kernel": (3, 3)}, inputs=images(VARIED, 2), dense=equal_images(2, 4, 5, 2)),
    DirectionSharedDense: dict(kwargs={"units": 5, "directions": 2}, inputs=images(VARIED, 6),
                               dense=equal_images(2, 3, 4, 6)),
    SequenceLSTM: dict(kwargs={"units": 4, "direction": -1}, inputs=sequences([5, 2, 7], 3)),
    RaggedDropout: dict(kwargs={"rate": 0.5, "seed": 1}, inputs=images(VARIED, 2)),
    SumOverHeight: dict(kwargs={}, inputs=images(VARIED, 2)),
    CtcScores: dict(kwargs={"num_classes": 6, "directions": 2}, inputs=images(VARIED, 4)),
}


SLOW = {MDLSTM2D}  # several seconds: four scans, traced again for each of the five checks


@pytest.mark.parametrize("cls", [pytest.param(cls, marks=pytest.mark.slow) if cls in SLOW else cls for cls in CASES],
                         ids=lambda cls: cls.__name__)
def test_layer_contract(cls, tmp_path):
    case = CASES[cls]
    dense_inputs = None
    if "dense" in case:
        ragged, dense_inputs = case["dense"]
        check_layer(cls, case["kwargs"], ragged, tmp_path, dense_inputs=dense_inputs)
    check_layer(cls, case["kwargs"], case["inputs"], tmp_path)


def test_every_layer_has_a_case():
    layers = {obj for _, obj in inspect.getmembers(tfnhr.layers, inspect.isclass)
              if issubclass(obj, keras.layers.Layer)}
    assert layers == set(CASES), f"layers without a contract case: {sorted(c.__name__ for c in layers - set(CASES))}"
