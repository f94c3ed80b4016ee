"""What every tfnhr recognizer shares: a Keras model from images to CTC column scores.

:class:`CtcModel` is the base of the hand-built :class:`~tfnhr.models.recognizer.Recognizer` and of
networks described in a config file (:class:`~tfnhr.models.config_network.ConfigNetwork`). A subclass
provides :meth:`CtcModel.forward`, the named outputs of its layers in execution order (the last
one is the model's output), and :attr:`CtcModel.width_reduction`; the base class adds the CTC
loss, ``model.fit``'s ``train_step``/``test_step``, :meth:`CtcModel.layer_outputs` (what
``tfnhr dump`` writes) and the saved charset and input height, so training, evaluation,
recognition and the service treat both kinds alike.

Shapes: images ragged ``[B, (H), (W), 1]`` float32 ink in [0, 1] -> column scores ragged
``[B, (T), K]`` unnormalised logits (``K = charset.num_classes``, class 0 = CTC blank); labels
ragged ``[B, (L)]`` int32 class indices 1..K-1.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import keras
import tensorflow as tf

from tfnhr.charset import BLANK_INDEX, Charset
from tfnhr.models.precision import dtype_policy


def column_entropy(column_scores: tf.RaggedTensor) -> tf.Tensor:
    """Per example, the entropy (nats) of its column distributions summed over its columns:
    ``[B]`` from logits ragged ``[B, (T), K]``, ``sum_t -sum_k p_tk log p_tk`` with
    ``p_t = softmax(scores_t)``; 0 for an example without columns. float64 for float64 scores,
    else float32 (as :meth:`CtcModel.ctc_loss`).

    Subtracted, times a weight, from the CTC loss it is the confidence penalty of Pereyra et al.
    (2017) on every output column: it keeps the columns' distributions from collapsing onto one
    class, so that readings of the same line in several views (:mod:`tfnhr.recognition.views`) and
    the beam search weigh their alternatives by probabilities that are not all 0 or 1.
    """
    dtype = tf.float64 if column_scores.dtype == tf.float64 else tf.float32
    log_probabilities = tf.nn.log_softmax(tf.cast(column_scores.flat_values, dtype), axis=-1)
    entropies = -tf.reduce_sum(tf.exp(log_probabilities) * log_probabilities, axis=-1)
    return tf.reduce_sum(tf.RaggedTensor.from_nested_row_splits(entropies, column_scores.nested_row_splits), axis=1)


class CtcModel(keras.Model):
    """A recognizer trained with CTC; see the module docstring.

    ``model.fit`` minimises the mean CTC loss per example minus :attr:`confidence_penalty` times
    the summed entropy of each example's column distributions (:func:`column_entropy`); set the
    attribute before ``fit`` (``tfnhr train --confidence-penalty`` does). It is a training
    setting, not saved with the model.

    Args:
      charset: the :class:`~tfnhr.charset.Charset` (or its ``to_config()`` dict); saved with
        the model, so a loaded model decodes without extra files.
      input_height: the height (px) images were scaled to in training, or ``None`` (kept their
        size). Not applied by ``call``; the data pipeline, ``tfnhr evaluate``/``recognize``/
        ``serve`` scale images to it, so a saved model carries its preprocessing.
      stroke_spacing: the distance between vertical strokes (a fraction of the height) that
        training brought every line to (:func:`tfnhr.data.spacing.normalize_spacing`), or ``None``
        (widths kept). Like ``input_height`` not applied by ``call``: reading
        (:class:`tfnhr.recognition.transcriber.Transcriber`, the export) scales each line's width to it.
    """

    def __init__(self, charset: Charset | dict, input_height: int | None = None,
                 stroke_spacing: float | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        if input_height is not None and input_height < 1:
            raise ValueError(f"input_height must be positive or None, got {input_height!r}")
        if stroke_spacing is not None and not stroke_spacing > 0:
            raise ValueError(f"stroke_spacing must be positive or None, got {stroke_spacing!r}")
        self.input_height = input_height
        self.stroke_spacing = None if stroke_spacing is None else float(stroke_spacing)
        self.charset = charset if isinstance(charset, Charset) else Charset.from_config(charset)
        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.confidence_penalty = 0.0

    @property
    def width_reduction(self) -> int:
        """Input columns per output column."""
        raise NotImplementedError

    @property
    def layer_names(self) -> list[str]:
        """The names :meth:`forward` yields, in execution order (the last is the output)."""
        raise NotImplementedError

    def forward(self, images, training: bool = False) -> Iterator[tuple[str, tf.RaggedTensor]]:
        """``(name, output)`` of every layer in execution order; outputs are ragged
        ``[B, (H'), (W'), C]`` (image layers) or ``[B, (T), C]`` (sequence layers)."""
        raise NotImplementedError

    def build(self, input_shape=None) -> None:
        """Create the weights by running a tiny ragged image through the network (no XLA compile)."""
        if not self.built:
            side = self.width_reduction
            self.call(tf.RaggedTensor.from_tensor(tf.zeros([1, side, side, 1]), ragged_rank=2))
            self.built = True

    def call(self, images, training: bool = False):
        """``[B, (H), (W), 1]`` images -> ``[B, (T), K]`` column scores (ragged in, ragged out)."""
        for _, output in self.forward(images, training=training):
            pass
        return output

    def layer_outputs(self, images, names: Sequence[str], training: bool = False) -> dict[str, tf.RaggedTensor]:
        """The outputs of the layers ``names`` (see :attr:`layer_names`) for ``images``; runs the
        network only as far as the last of them. ``ValueError`` names unknown layers."""
        unknown = [name for name in names if name not in self.layer_names]
        if unknown:
            raise ValueError(f"unknown layer(s) {unknown}; this model has {self.layer_names}")
        wanted, outputs = set(names), {}
        for name, output in self.forward(images, training=training):
            if name in wanted:
                outputs[name] = output
                if len(outputs) == len(wanted):
                    break
        return {name: outputs[name] for name in names}

    def ctc_loss(self, labels: tf.RaggedTensor, column_scores: tf.RaggedTensor) -> tf.Tensor:
        """Mean CTC loss per example; ``labels`` ragged ``[B, (L)]`` in 1..K-1, scores ragged ``[B, (T), K]``.

        The labels go to ``tf.nn.ctc_loss`` as a ``SparseTensor``, which selects TensorFlow's
        C++ CTC kernel (loss and gradient in one pass): 8 ms instead of 48 ms for the loss and
        gradient of 11 lines x 110 columns x 80 classes on one thread, against the dense-label
        path (``keras.ops.ctc_loss``), which runs the forward-backward recursion as TensorFlow
        ops; the losses are equal and the gradients agree to float32 rounding
        (benchmarks/training_throughput.py profiles it as "CTC"). An example whose label is longer
        than its columns raises ``InvalidArgumentError`` ("Not enough time for target
        transition sequence"); one that fits only without the blanks between repeated
        characters (see :func:`tfnhr.data.samples.ctc_frames_needed`) has an infinite loss.
        ``tfnhr train`` drops both kinds before training.
        """
        scores = column_scores.to_tensor()
        if scores.dtype not in (tf.float32, tf.float64):
            scores = tf.cast(scores, tf.float32)  # mixed precision: the kernel takes float32/64
        loss = tf.nn.ctc_loss(
            labels=tf.cast(labels, tf.int32).to_sparse(), logits=scores, label_length=None,
            logit_length=tf.cast(column_scores.row_lengths(), tf.int32), logits_time_major=False,
            blank_index=BLANK_INDEX)
        return tf.reduce_mean(loss)  # float32 (float64 for float64 scores), as keras.ops.ctc_loss

    def train_step(self, data):
        images, labels = data
        with tf.GradientTape() as tape:
            column_scores = self(images, training=True)
            loss = self.ctc_loss(labels, column_scores)
            objective = loss
            if self.confidence_penalty:
                objective -= self.confidence_penalty * tf.reduce_mean(column_entropy(column_scores))
            scaled = self.optimizer.scale_loss(objective)  # mixed_float16: Keras' loss-scaling optimizer
        variables = self.trainable_variables
        self.optimizer.apply(tape.gradient(scaled, variables), variables)
        self.loss_tracker.update_state(loss)
        return {"loss": self.loss_tracker.result()}

    def test_step(self, data):
        images, labels = data
        self.loss_tracker.update_state(self.ctc_loss(labels, self(images, training=False)))
        return {"loss": self.loss_tracker.result()}

    @property
    def metrics(self):
        return [self.loss_tracker]

    def get_config(self) -> dict:
        return {**super().get_config(), "charset": self.charset.to_config(), "input_height": self.input_height,
                "stroke_spacing": self.stroke_spacing}

    @classmethod
    def from_config(cls, config: dict) -> "CtcModel":
        """The model rebuilt with its layers under its saved dtype policy (a mixed-precision model's
        layers are made in its ``__init__``, where Keras would give them the global policy)."""
        policy = config.get("dtype")
        with dtype_policy(None if policy is None else keras.dtype_policies.get(policy).name):
            return cls(**config)
