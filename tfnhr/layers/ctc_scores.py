"""``CtcScores``: the ``ctc`` layer of a config network: per-column class scores for CTC."""

from __future__ import annotations

import keras
import tensorflow as tf

from tfnhr.layers.dense import DirectionSharedDense


@keras.saving.register_keras_serializable(package="tfnhr")
class CtcScores(keras.layers.Layer):
    """Ragged ``[B, (T), C]`` or ``[B, (H), (W), C]`` -> ``[B, (T), num_classes]`` logits.

    With ``project`` a dense map (shared across ``directions`` channel groups and summed over
    them, :class:`~tfnhr.layers.DirectionSharedDense`) gives ``num_classes`` scores; without,
    the input must already have ``num_classes`` channels. Image input is then summed over its
    height (``T = W``), as the recognizer of Wenniger et al. 2019 does after its last MDLSTM.
    """

    def __init__(self, num_classes: int, directions: int = 1, project: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        self.num_classes, self.directions, self.project = int(num_classes), int(directions), bool(project)
        self.dense = DirectionSharedDense(self.num_classes, self.directions, name="scores") if project else None

    def build(self, input_shape) -> None:
        if self.dense is not None:
            self.dense.build(input_shape)
        elif input_shape[-1] != self.num_classes:
            raise ValueError(f"layer {self.name!r}: with project false its input needs {self.num_classes} "
                             f"channels (the charset's classes), got {input_shape[-1]}")

    def call(self, inputs):
        scores = inputs if self.dense is None else self.dense(inputs)
        return tf.reduce_sum(scores, axis=1) if inputs.shape.rank == 4 else scores

    def compute_output_shape(self, input_shape):
        return (input_shape[0], None, self.num_classes)

    def get_config(self) -> dict:
        return {**super().get_config(), "num_classes": self.num_classes, "directions": self.directions,
                "project": self.project}
