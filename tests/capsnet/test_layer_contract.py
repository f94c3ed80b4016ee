"""Every Keras layer of :mod:`capsnet` keeps the layer contract of
:func:`tests.helpers.layer_contract.check_layer` (config and ``.keras`` round trips, mixed
precision); a layer added without a case here fails :func:`test_every_layer_has_a_case`."""

from __future__ import annotations

import inspect

import keras
import numpy as np
import pytest
import tensorflow as tf

import capsnet.capsules
import capsnet.models
from capsnet.capsules import CapsuleLength, CapsuleMask, PrimaryCapsules, RoutingCapsules
from capsnet.models import LaneBlock
from tests.helpers.layer_contract import check_layer

RNG = np.random.default_rng(0)


def dense(*shape):
    return tf.constant(RNG.uniform(-1, 1, shape), tf.float32)


CASES = {
    PrimaryCapsules: dict(kwargs={"channels": 2, "dim": 4, "kernel_size": 3, "strides": 2}, inputs=dense(2, 9, 9, 3)),
    RoutingCapsules: dict(kwargs={"capsules": 3, "dim": 4, "routings": 2}, inputs=dense(2, 6, 5)),
    CapsuleLength: dict(kwargs={}, inputs=dense(2, 3, 4)),
    CapsuleMask: dict(kwargs={}, inputs=dense(2, 3, 4)),
    LaneBlock: dict(kwargs={"lane": "1x2", "n_class": 3, "routings": 2}, inputs=dense(2, 24, 24, 1)),
}


@pytest.mark.parametrize("cls", list(CASES), ids=lambda cls: cls.__name__)
def test_layer_contract(cls, tmp_path):
    case = CASES[cls]
    check_layer(cls, case["kwargs"], case["inputs"], tmp_path)


def test_every_layer_has_a_case():
    layers = {obj for module in (capsnet.capsules, capsnet.models)
              for _, obj in inspect.getmembers(module, inspect.isclass)
              if issubclass(obj, keras.layers.Layer) and not issubclass(obj, keras.Model)
              and obj.__module__.startswith("capsnet")}
    assert layers == set(CASES), f"layers without a contract case: {sorted(c.__name__ for c in layers - set(CASES))}"
