"""The weight averaging (:mod:`tfnhr.training.averaging`) in real ``model.fit`` runs of a Dense
model: the average a validation sees against a NumPy running average of the weights recorded
after every update, training going on from its own weights, and a replaced model (the halving's
restore) restarting the average."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tfnhr.training.averaging import WARM_UP, WeightAveraging, momentum_at


class Recorder(keras.callbacks.Callback):
    """Weights after every update, at every epoch end and at every epoch start, as the callbacks
    after :class:`WeightAveraging` see them; optionally replaces the weights at one epoch end."""

    def __init__(self, replace_at: int | None = None) -> None:
        super().__init__()
        self.after_update, self.at_end, self.at_begin, self.replace_at = [], [], [], replace_at
        self.replacement = None

    def _weights(self):
        return [keras.ops.convert_to_numpy(w).copy() for w in self.model.trainable_weights]

    def on_train_batch_end(self, batch, logs=None):
        self.after_update.append(self._weights())

    def on_epoch_end(self, epoch, logs=None):
        self.at_end.append(self._weights())
        if epoch == self.replace_at:
            self.replacement = [w + 1.0 for w in self._weights()]
            for variable, value in zip(self.model.trainable_weights, self.replacement):
                variable.assign(value)

    def on_epoch_begin(self, epoch, logs=None):
        self.at_begin.append(self._weights())


def _fit(momentum, epochs=3, steps=7, replace_at=None):
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(8 * steps, 3)).astype(np.float32), rng.normal(size=(8 * steps, 2)).astype(np.float32)
    recorder = Recorder(replace_at)
    model.fit(x, y, batch_size=8, epochs=epochs, shuffle=False, verbose=0,
              callbacks=[WeightAveraging(momentum), recorder])
    return model, recorder


def _running_average(weights_per_update, momentum):
    """The reference: a plain loop over the updates."""
    average = None
    for update, weights in enumerate(weights_per_update, start=1):
        decay = momentum_at(momentum, update)
        average = [w.copy() for w in weights] if average is None else [
            decay * a + (1 - decay) * w for a, w in zip(average, weights)]
    return average


def test_momentum_at_warms_up_to_the_momentum():
    assert momentum_at(0.99, 1) == 0
    assert momentum_at(0.99, 2) == pytest.approx(2 / (WARM_UP + 1))
    assert momentum_at(0.99, 10_000) == 0.99
    assert momentum_at(0.5, 30) == 0.5


def test_validation_sees_the_running_average_and_training_goes_on_from_its_own_weights():
    momentum, steps = 0.9, 7
    model, recorder = _fit(momentum, epochs=3, steps=steps)
    for epoch in range(3):
        expected = _running_average(recorder.after_update[:steps * (epoch + 1)], momentum)
        for actual, reference in zip(recorder.at_end[epoch], expected):
            np.testing.assert_allclose(actual, reference, rtol=1e-5, atol=1e-6)
        # the average differs from the last update's weights, which come back for the next epoch
        assert not np.allclose(recorder.at_end[epoch][0], recorder.after_update[steps * (epoch + 1) - 1][0])
        if epoch < 2:
            for begun, trained in zip(recorder.at_begin[epoch + 1], recorder.after_update[steps * (epoch + 1) - 1]):
                np.testing.assert_array_equal(begun, trained)
    # after the last epoch the model keeps the average
    for final, averaged in zip(model.trainable_weights, recorder.at_end[-1]):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(final), averaged)


def test_weights_replaced_after_a_validation_restart_the_average():
    momentum, steps = 0.9, 5
    _, recorder = _fit(momentum, epochs=3, steps=steps, replace_at=0)
    for begun, replaced in zip(recorder.at_begin[1], recorder.replacement):
        np.testing.assert_array_equal(begun, replaced)  # training goes on from the replacement
    expected = _running_average(recorder.after_update[steps:2 * steps], momentum)  # from the restart on
    for actual, reference in zip(recorder.at_end[1], expected):
        np.testing.assert_allclose(actual, reference, rtol=1e-5, atol=1e-6)


def test_momentum_zero_validates_the_last_update_and_bad_momenta_are_refused():
    _, recorder = _fit(0.0, epochs=1, steps=4)
    for actual, last in zip(recorder.at_end[0], recorder.after_update[-1]):
        np.testing.assert_allclose(actual, last, rtol=1e-6)
    for momentum in (1.0, -0.1):
        with pytest.raises(ValueError, match="momentum"):
            WeightAveraging(momentum)
