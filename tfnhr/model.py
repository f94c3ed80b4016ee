"""The handwriting recognizer of the seed paper (§II): MDLSTM -> block conv -> MDLSTM -> block
conv -> MDLSTM -> fully connected shared across directions -> sum over directions and height ->
per-column character scores for CTC.

Shapes: images ragged ``[B, (H), (W), 1]`` float32 ink in [0, 1] (any height and width, see
:func:`tfnhr.data.images.to_ink`) -> column scores ragged ``[B, (T), K]`` unnormalised
logits, ``T = ceil(ceil(W / bw1) / bw2)`` columns, ``K = charset.num_classes`` (class 0 = CTC
blank). Dense ``[B, H, W, 1]`` input (every pixel valid) gives dense ``[B, T, K]``.

The model trains with ``model.fit`` on ``(images, labels)`` batches (labels ragged ``[B, (L)]``
int32 class indices 1..K-1): its ``train_step``/``test_step`` compute the CTC loss.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import tensorflow as tf

from tfnhr.charset import BLANK_INDEX, Charset
from tfnhr.layers import BlockConv2D, MDLSTM2D

PRESETS: dict[str, dict] = {
    "small": {"mdlstm_units": (2, 10, 50), "conv_filters": (6, 20)},
    "large": {"mdlstm_units": (4, 20, 100), "conv_filters": (12, 40)},
}
"""The seed's two model sizes (§VII): MDLSTM units per level and block-conv filters."""


@keras.saving.register_keras_serializable(package="tfnhr")
class DirectionSharedDense(keras.layers.Layer):
    """One dense map applied to every direction's features, then summed over the directions.

    ``[..., D * u]`` -> ``[..., K]``: ``sum_d x[..., d*u:(d+1)*u] @ kernel + bias`` (the seed's
    fully connected layer shared across the MDLSTM directions). Ragged input maps its flat values.
    """

    def __init__(self, units: int, directions: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.units = int(units)
        self.directions = int(directions)

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
        return tf.reshape(tf.reduce_sum(projected, axis=1), tf.concat([leading, [self.units]], 0)) + self.bias

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)

    def get_config(self) -> dict:
        return {**super().get_config(), "units": self.units, "directions": self.directions}


@keras.saving.register_keras_serializable(package="tfnhr")
class Recognizer(keras.Model):
    """The MDLSTM recognizer; build it with :func:`build_recognizer`.

    Args:
      charset: the :class:`~tfnhr.charset.Charset` (or its ``to_config()`` dict); saved with
        the model, so a loaded model decodes without extra files.
      mdlstm_units: hidden units per direction of the three MDLSTM levels.
      conv_filters: filters of the two block convolutions (tanh).
      block: ``(bh, bw)`` kernel = stride of both block convolutions (pixels), or two such pairs.
      dropout: dropout rate on the MDLSTM outputs (training only).
      cell, packing, directions: passed to every :class:`~tfnhr.layers.MDLSTM2D`.
      input_height: the height (px) images were scaled to in training, or ``None`` (kept their
        size). Not applied by ``call``; the data pipeline, ``tfnhr evaluate`` and ``recognize``
        scale images to it, so a saved model carries its preprocessing.
    """

    def __init__(
        self,
        charset: Charset | dict,
        mdlstm_units: Sequence[int] = (2, 10, 50),
        conv_filters: Sequence[int] = (6, 20),
        block: Sequence[int] | Sequence[Sequence[int]] = (2, 4),
        dropout: float = 0.25,
        cell: str = "leaky_lp",
        packing: str = "examples",
        directions: int = 4,
        input_height: int | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if input_height is not None and input_height < 1:
            raise ValueError(f"input_height must be positive or None, got {input_height!r}")
        self.input_height = input_height
        self.charset = charset if isinstance(charset, Charset) else Charset.from_config(charset)
        self.mdlstm_units = tuple(int(u) for u in mdlstm_units)
        self.conv_filters = tuple(int(f) for f in conv_filters)
        if len(self.mdlstm_units) != len(self.conv_filters) + 1 or not self.conv_filters:
            raise ValueError(f"need one more MDLSTM level than block convolutions, got units "
                             f"{self.mdlstm_units} and filters {self.conv_filters}")
        self.blocks = _blocks(block, len(self.conv_filters))
        self.dropout = float(dropout)
        self.cell, self.packing, self.directions = cell, packing, int(directions)
        self.mdlstms = [MDLSTM2D(units, cell=cell, directions=self.directions, packing=packing,
                                 dropout=self.dropout, name=f"mdlstm{level}")
                        for level, units in enumerate(self.mdlstm_units, start=1)]
        self.convs = [BlockConv2D(filters, block=block_size, activation="tanh", name=f"block_conv{level}")
                      for level, (filters, block_size) in enumerate(zip(self.conv_filters, self.blocks), start=1)]
        self.scores = DirectionSharedDense(self.charset.num_classes, self.directions, name="scores")
        self.loss_tracker = keras.metrics.Mean(name="loss")

    @property
    def width_reduction(self) -> int:
        """Input columns per output column (the product of the block widths)."""
        reduction = 1
        for _, width in self.blocks:
            reduction *= width
        return reduction

    def build(self, input_shape=None) -> None:
        """Create the weights by running a tiny ragged image through the network (no XLA compile)."""
        if not self.built:
            side = self.width_reduction
            self.call(tf.RaggedTensor.from_tensor(tf.zeros([1, side, side, 1]), ragged_rank=2))
            self.built = True

    def call(self, images, training: bool = False):
        """``[B, (H), (W), 1]`` images -> ``[B, (T), K]`` column scores (ragged in, ragged out)."""
        features = images
        for level, mdlstm in enumerate(self.mdlstms):
            features = mdlstm(features, training=training)
            if level < len(self.convs):
                features = self.convs[level](features)
        per_pixel = self.scores(features)
        return tf.reduce_sum(per_pixel, axis=1)

    def ctc_loss(self, labels: tf.RaggedTensor, column_scores: tf.RaggedTensor) -> tf.Tensor:
        """Mean CTC loss per example; ``labels`` ragged ``[B, (L)]`` in 1..K-1, scores ragged ``[B, (T), K]``."""
        return tf.reduce_mean(keras.ops.ctc_loss(
            labels.to_tensor(), column_scores.to_tensor(), labels.row_lengths(),
            column_scores.row_lengths(), mask_index=BLANK_INDEX))

    def train_step(self, data):
        images, labels = data
        with tf.GradientTape() as tape:
            loss = self.ctc_loss(labels, self(images, training=True))
        variables = self.trainable_variables
        self.optimizer.apply(tape.gradient(loss, variables), variables)
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
        return {
            **super().get_config(),
            "charset": self.charset.to_config(),
            "mdlstm_units": list(self.mdlstm_units),
            "conv_filters": list(self.conv_filters),
            "block": [list(b) for b in self.blocks],
            "dropout": self.dropout,
            "cell": self.cell,
            "packing": self.packing,
            "directions": self.directions,
            "input_height": self.input_height,
        }


def _blocks(block, levels: int) -> tuple[tuple[int, int], ...]:
    """``(bh, bw)`` or ``levels`` such pairs -> one positive pair per block convolution."""
    pairs = [tuple(block)] * levels if all(isinstance(b, int) for b in block) else [tuple(b) for b in block]
    if len(pairs) != levels or any(len(p) != 2 or min(p) < 1 for p in pairs):
        raise ValueError(f"block must be (bh, bw) or {levels} such pairs of positive ints, got {block!r}")
    return tuple((int(h), int(w)) for h, w in pairs)


def build_recognizer(
    charset: Charset,
    mdlstm_units: Sequence[int] | None = None,
    conv_filters: Sequence[int] | None = None,
    block: Sequence[int] | Sequence[Sequence[int]] = (2, 4),
    dropout: float = 0.25,
    cell: str = "leaky_lp",
    packing: str = "examples",
    preset: str = "small",
    input_height: int | None = None,
) -> Recognizer:
    """A built :class:`Recognizer` for ``charset``; ``mdlstm_units``/``conv_filters`` default to
    the ``preset`` (``"small"`` (2, 10, 50)/(6, 20) or ``"large"`` (4, 20, 100)/(12, 40))."""
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {preset!r}")
    model = Recognizer(
        charset,
        mdlstm_units=PRESETS[preset]["mdlstm_units"] if mdlstm_units is None else mdlstm_units,
        conv_filters=PRESETS[preset]["conv_filters"] if conv_filters is None else conv_filters,
        block=block, dropout=dropout, cell=cell, packing=packing, input_height=input_height)
    model.build()
    return model


def load_recognizer(path) -> Recognizer:
    """A :class:`Recognizer` saved with ``model.save(path)`` (``.keras``). Use this rather than
    ``keras.models.load_model`` in a fresh process: it registers the classes the file names.

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for a file that holds no
    recognizer."""
    from pathlib import Path

    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: no such model file")
    model = keras.models.load_model(path)
    if not isinstance(model, Recognizer):
        raise ValueError(f"{path} holds a {type(model).__name__}, not a tfnhr Recognizer")
    return model
