"""An exponential moving average of the weights over the updates (Polyak and Juditsky 1992),
validated, checkpointed and kept instead of the last update's weights.

With small, noisy batches the weights after any one update scatter around where training is
heading; their running average lies closer to it. ``tfnhr train --ema MOMENTUM`` adds
:class:`WeightAveraging` before every other callback, so at each validation the model holds the
average while validation, the best checkpoint, the learning-rate halving's best weights and
``last.keras`` see it; the update's own weights come back when training goes on.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

WARM_UP = 10
"""The momentum's warm-up (:func:`momentum_at`): at the ``n``-th update it is at most ``n / (WARM_UP
- 1 + n)``, so the first updates are not drowned by the starting weights (TensorFlow's
``ExponentialMovingAverage(num_updates=t)`` caps it at ``(1 + t) / (10 + t)`` alike)."""


def momentum_at(momentum: float, update: int) -> float:
    """The weight of the old average at the ``update``-th update (1-based) since the average
    started: ``min(momentum, update / (WARM_UP - 1 + update))``, 0 at the first (the average
    starts as the first update's weights)."""
    return 0.0 if update <= 1 else min(momentum, update / (WARM_UP - 1 + update))


class WeightAveraging(keras.callbacks.Callback):
    """Keep ``average <- d * average + (1 - d) * weights`` after every update (``d``:
    :func:`momentum_at`) and put the average into the model at every epoch end (validation).

    Place it before the callbacks that should see the average (validation, checkpoints, the
    learning-rate halving). At the next epoch's start the update's own weights come back, unless
    a callback replaced the model's weights in between (the halving restoring its best weights):
    then training goes on from those, and the average starts again from them. After the last
    epoch the model keeps the average.

    Args:
      momentum: ``d``'s limit in [0, 1); ``1 / (1 - momentum)`` updates is about how far back the
        average reaches (0.99: about the last 100 updates).

    Attributes: ``updates`` (averaged since the average last started).
    """

    def __init__(self, momentum: float = 0.99) -> None:
        super().__init__()
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        self.momentum = float(momentum)
        self.updates = 0
        self._average: list[tf.Variable] | None = None
        self._trained: list[np.ndarray] | None = None  # the update's own weights while the model holds the average
        self._shown: list[np.ndarray] | None = None  # the average as put into the model

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.updates = 0
        self._trained = self._shown = None
        if self._average is None:
            self._average = [tf.Variable(tf.zeros(v.shape, tf.float32), trainable=False) for v in self._variables()]

    def _variables(self) -> list:
        return list(self.model.trainable_weights)

    @tf.function
    def _blend(self, momentum: tf.Tensor) -> None:
        for average, variable in zip(self._average, self._variables()):
            average.assign(momentum * average + (1 - momentum) * tf.cast(variable, average.dtype))

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self.updates += 1  # the first update's momentum is 0: the average starts as its weights
        self._blend(tf.constant(momentum_at(self.momentum, self.updates), tf.float32))

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if not self.updates:  # nothing averaged since the average (re)started
            return
        variables = self._variables()
        self._trained = [keras.ops.convert_to_numpy(v) for v in variables]
        self._shown = [average.numpy().astype(v.dtype) for average, v in zip(self._average, variables)]
        for variable, shown in zip(variables, self._shown):
            variable.assign(shown)

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        if self._trained is None:
            return
        variables = self._variables()
        if all(np.array_equal(keras.ops.convert_to_numpy(v), shown) for v, shown in zip(variables, self._shown)):
            for variable, trained in zip(variables, self._trained):
                variable.assign(trained)
        else:  # replaced by another callback: train on from there, the average starts again
            self.updates = 0
        self._trained = self._shown = None
