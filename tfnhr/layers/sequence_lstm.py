"""``SequenceLSTM``: a 1-D LSTM along the width of ragged sequences or of every image row.

Input and output::

    ragged [B, (T), C]        ->  ragged [B, (T), units]          (one sequence per example)
    ragged [B, (H), (W), C]   ->  ragged [B, (H), (W), units]     (one sequence per image row)

``direction=1`` reads left to right, ``-1`` right to left (each sequence reversed within its own
length, so padding never comes first). The steps run as ``keras.layers.LSTM`` on the zero-padded
batch with a mask (standard LSTM: input, forget, cell, output gates; forget bias 1); the padded
steps carry the state and their outputs are dropped. This is RETURNN's ``rec`` layer; two of
them with opposite directions reading the same input make a bidirectional layer.
"""

from __future__ import annotations

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="tfnhr")
class SequenceLSTM(keras.layers.Layer):
    """See the module docstring. ``units``: hidden size; ``direction``: 1 or -1."""

    def __init__(self, units: int, direction: int = 1, **kwargs) -> None:
        super().__init__(**kwargs)
        if int(units) != units or units < 1:
            raise ValueError(f"units must be a positive integer, got {units!r}")
        if direction not in (1, -1):
            raise ValueError(f"direction must be 1 or -1, got {direction!r}")
        self.units, self.direction = int(units), int(direction)
        self.lstm = keras.layers.LSTM(self.units, return_sequences=True, name="lstm")

    def build(self, input_shape) -> None:
        if input_shape[-1] is None:
            raise ValueError(f"{self.name}: the channel count (last axis) must be known, got shape {input_shape}")
        self.lstm.build((None, None, input_shape[-1]))

    def call(self, inputs: tf.RaggedTensor) -> tf.RaggedTensor:
        if not isinstance(inputs, tf.RaggedTensor) or inputs.shape.rank not in (3, 4):
            raise ValueError(f"{self.name}: expected ragged [B, (T), C] or [B, (H), (W), C], got {inputs!r}")
        if inputs.shape.rank == 4:
            return inputs.with_values(self._run(inputs.values))
        return self._run(inputs)

    def _run(self, sequences: tf.RaggedTensor) -> tf.RaggedTensor:
        """Ragged ``[N, (T), C]`` -> ragged ``[N, (T), units]``."""
        lengths = sequences.row_lengths()
        padded = sequences.to_tensor()
        if self.direction < 0:
            padded = tf.reverse_sequence(padded, lengths, seq_axis=1, batch_axis=0)
        outputs = self.lstm(padded, mask=tf.sequence_mask(lengths, tf.shape(padded)[1]))
        if self.direction < 0:
            outputs = tf.reverse_sequence(outputs, lengths, seq_axis=1, batch_axis=0)
        return tf.RaggedTensor.from_tensor(outputs, lengths=lengths)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)

    def get_config(self) -> dict:
        return {**super().get_config(), "units": self.units, "direction": self.direction}
