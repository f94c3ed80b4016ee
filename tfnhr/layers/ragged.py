"""Small layers that take ragged image batches as they come (no padding leaks into results).

* :class:`SameConv2D`: a stride-1 convolution with "same" zero padding **per example**: the
  batch is zero-padded to its largest height and width, convolved, and cut back to each
  example's size. Zeros beyond an example's border are exactly its own "same" padding, so every
  example gets what it would get alone (the padding costs compute; the MDLSTM packs instead).
* :class:`RaggedDropout`: dropout on every valid value of a ragged (or dense) tensor.
* :class:`SumOverHeight`: ``[B, (H), (W), C]`` -> ``[B, (W), C]``, the sum over each column.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="tfnhr")
class SameConv2D(keras.layers.Layer):
    """``[B, (H), (W), C]`` -> ``[B, (H), (W), filters]``: ``kernel`` (kh, kw) convolution, stride
    1, zero "same" padding per example, then ``activation`` (tanh by default). Dense input works too."""

    def __init__(self, filters: int, kernel: Sequence[int] = (3, 3), activation: str | None = "tanh",
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.filters, self.kernel_size = int(filters), tuple(int(k) for k in kernel)
        if self.filters < 1 or len(self.kernel_size) != 2 or min(self.kernel_size) < 1:
            raise ValueError(f"need filters >= 1 and a (kh, kw) kernel of positive sizes, got "
                             f"{filters!r}, {kernel!r}")
        self.conv = keras.layers.Conv2D(self.filters, self.kernel_size, padding="same",
                                        activation=activation, name="conv")

    def build(self, input_shape) -> None:
        self.conv.build(tuple(input_shape))

    def call(self, inputs):
        if not isinstance(inputs, tf.RaggedTensor):
            return self.conv(inputs)
        heights, widths = inputs.row_lengths(), inputs.values.row_lengths()
        outputs = self.conv(inputs.to_tensor())
        return tf.RaggedTensor.from_tensor(outputs, lengths=(heights, widths))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.filters,)

    def get_config(self) -> dict:
        return {**super().get_config(), "filters": self.filters, "kernel": list(self.kernel_size),
                "activation": keras.activations.serialize(self.conv.activation)}


@keras.saving.register_keras_serializable(package="tfnhr")
class RaggedDropout(keras.layers.Layer):
    """Dropout with ``rate`` on each valid value (training only); shape unchanged."""

    def __init__(self, rate: float, seed: int | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"dropout rate must be in [0, 1), got {rate!r}")
        self.rate, self.seed = float(rate), seed
        self.dropout = keras.layers.Dropout(self.rate, seed=seed)

    def call(self, inputs, training: bool = False):
        if isinstance(inputs, tf.RaggedTensor):
            return inputs.with_flat_values(self.dropout(inputs.flat_values, training=training))
        return self.dropout(inputs, training=training)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self) -> dict:
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}


@keras.saving.register_keras_serializable(package="tfnhr")
class SumOverHeight(keras.layers.Layer):
    """``[B, (H), (W), C]`` -> ``[B, (W), C]``: each column summed over its rows (RETURNN's
    "collapse" of a 2-D layer into a sequence along the width)."""

    def call(self, inputs):
        return tf.reduce_sum(inputs, axis=1)

    def compute_output_shape(self, input_shape):
        return (input_shape[0],) + tuple(input_shape[2:])
