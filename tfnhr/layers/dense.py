"""``DirectionSharedDense``: a dense map shared across MDLSTM directions (ragged or dense input)."""

from __future__ import annotations

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="tfnhr")
class DirectionSharedDense(keras.layers.Layer):
    """One dense map applied to every direction's features, then summed over the directions.

    ``[..., D * u]`` -> ``[..., K]``: ``sum_d x[..., d*u:(d+1)*u] @ kernel + bias`` (Wenniger et al. 2019's
    fully connected layer shared across the MDLSTM directions), then ``activation`` (none by
    default). ``directions=1`` is a plain dense layer. Ragged input maps its flat values.
    """

    def __init__(self, units: int, directions: int = 1, activation: str | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        if int(units) != units or units < 1 or int(directions) != directions or directions < 1:
            raise ValueError(f"units and directions must be positive integers, got {units!r}, {directions!r}")
        self.units = int(units)
        self.directions = int(directions)
        self.activation = keras.activations.get(activation)

    def build(self, input_shape) -> None:
        channels = input_shape[-1]
        if channels % self.directions:
            raise ValueError(f"{channels} input channels do not split into {self.directions} directions")
        self.kernel = self.add_weight(name="kernel", shape=(channels // self.directions, self.units),
                                      initializer="glorot_uniform")
        self.bias = self.add_weight(name="bias", shape=(self.units,), initializer="zeros")

    def call(self, inputs):
        if isinstance(inputs, tf.RaggedTensor):
            return tf.ragged.map_flat_values(self.call, inputs)
        # One [N * D, u] @ [u, K] matmul (an einsum over "...du,uk" has a slow kernel gradient:
        # TF forms the broadcast product [N, D, u, K] for it).
        leading = tf.shape(inputs)[:-1]
        per_direction = tf.reshape(inputs, [-1, inputs.shape[-1] // self.directions])
        projected = tf.reshape(tf.matmul(per_direction, self.kernel), [-1, self.directions, self.units])
        summed = tf.reshape(tf.reduce_sum(projected, axis=1), tf.concat([leading, [self.units]], 0))
        return self.activation(summed + self.bias)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)

    def get_config(self) -> dict:
        return {**super().get_config(), "units": self.units, "directions": self.directions,
                "activation": keras.activations.serialize(self.activation)}
