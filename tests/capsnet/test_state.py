"""Training state by name (:mod:`capsnet.state`): a fresh MLCN that takes a trained one's state
continues training exactly as the trained one does."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from capsnet.models import build_mlcn
from capsnet.state import restore_training_state, training_state

SHAPE, CLASSES, LANES = (20, 20, 1), 4, ["1x1", "2x1", "1x2"]


def batch(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.random((6, *SHAPE), dtype=np.float32), rng.integers(CLASSES, size=6).astype(np.int32)


def trained(seed: int, steps: int) -> keras.Model:
    keras.utils.set_random_seed(seed)
    model = build_mlcn(SHAPE, CLASSES, LANES, lane_dropout=0.2)
    model.compile(optimizer=keras.optimizers.Adam(0.01))
    for step in range(steps):
        model.train_on_batch(*batch(step))
    return model


@pytest.mark.slow
def test_a_fresh_model_that_takes_the_state_continues_as_the_trained_one():
    source, target = trained(1, steps=2), trained(2, steps=0)
    assert source.name != target.name  # keys do not depend on the models' names
    restore_training_state(target, training_state(source))
    assert int(target.optimizer.iterations) == 2
    for a, b in zip(source.optimizer.variables, target.optimizer.variables, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    losses = [float(model.train_on_batch(*batch(7), return_dict=True)["loss"]) for model in (source, target)]
    assert losses[0] == losses[1]
    for a, b in zip(source.get_weights(), target.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_state_of_another_architecture_is_refused_by_name():
    keras.utils.set_random_seed(0)
    other = build_mlcn(SHAPE, CLASSES, ["1x1", "2x1"])
    with pytest.raises(ValueError, match="lacks .* weights of this model \\(e.g. lane2/"):
        restore_training_state(trained(1, steps=0), training_state(other))
    wider = build_mlcn(SHAPE, CLASSES, ["1x1", "2x1", "2x2"])
    with pytest.raises(ValueError, match="saved lane2/conv1/kernel has shape"):
        restore_training_state(trained(1, steps=0), training_state(wider))
