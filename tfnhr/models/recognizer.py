"""The handwriting recognizer of Wenniger et al. 2019 (§II): MDLSTM -> block conv -> MDLSTM -> block
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

import itertools
from collections.abc import Iterator, Sequence

import keras
import tensorflow as tf

from tfnhr.charset import Charset
from tfnhr.config.choices import MODEL_PRESET_SIZES
from tfnhr.models.ctc_model import CtcModel
from tfnhr.layers import BlockConv2D, DirectionSharedDense, MDLSTM2D, SameConv2D

STEM_KERNEL = (3, 3)
"""Kernel (height, width, px) of the stem's convolutions (stride 1, "same" padding per example)."""

PRESETS: dict[str, dict] = MODEL_PRESET_SIZES
"""Model sizes, MDLSTM units per level and block-conv filters: ``small`` and ``large`` are the two
of Wenniger et al. 2019 (§VII); ``small-wide`` is ``small`` with its first MDLSTM level and first
block convolution twice as wide (4 units, 12 filters; 199,009 parameters against 196,379 with
the main job's characters), about 11 % more time per training step. It is what ``tfnhr train``
trains by default (:data:`tfnhr.config.choices.DEFAULT_MODEL_PRESET`): at equal training time it read
held-out fonts better than ``small`` (docs/lab/architecture.md, "Wider first level"). ``small-stem``
replaces ``small-wide``'s first MDLSTM level by two 3x3 convolutions (8 and 16 filters); ``stem-80``
has the same stem and wider levels, (12, 80) units and (16, 32) filters (490,235 parameters
against 199,073 with the main job's characters, 1.38x the time per training step;
docs/lab/main-job-full.md)."""


@keras.saving.register_keras_serializable(package="tfnhr")
class Recognizer(CtcModel):
    """The MDLSTM recognizer; build it with :func:`build_recognizer`.

    Args:
      charset, input_height, stroke_spacing: see :class:`~tfnhr.models.ctc_model.CtcModel`.
      mdlstm_units: hidden units per direction of the three MDLSTM levels.
      conv_filters: filters of the two block convolutions (tanh).
      block: ``(bh, bw)`` kernel = stride of both block convolutions (pixels), or two such pairs.
      dropout: dropout rate on the MDLSTM outputs (training only).
      cell, packing, directions: passed to every :class:`~tfnhr.layers.MDLSTM2D`.
      stem_filters: filters of 3x3 tanh convolutions (:class:`~tfnhr.layers.SameConv2D`, per
        example) that read the image in place of a first MDLSTM level; then the first block
        convolution follows them, and ``mdlstm_units`` has one level per block convolution.
        Empty (the default): the paper's network.

    Layers (:attr:`layer_names`): ``mdlstm1``, ``block_conv1``, ``mdlstm2``, ``block_conv2``,
    ``mdlstm3`` (with a stem: ``stem1``, ``stem2``, ``block_conv1``, ``mdlstm1``, ``block_conv2``,
    ``mdlstm2``), ``scores`` (per-pixel class scores ``[B, (H'), (W'), K]``) and ``output`` (their
    sum over the height, ``[B, (T), K]``).
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
        stem_filters: Sequence[int] = (),
        **kwargs,
    ) -> None:
        super().__init__(charset, input_height, **kwargs)
        self.mdlstm_units = tuple(int(u) for u in mdlstm_units)
        self.conv_filters = tuple(int(f) for f in conv_filters)
        self.stem_filters = tuple(int(f) for f in stem_filters)
        levels_after_convs = len(self.conv_filters) + (0 if self.stem_filters else 1)
        if len(self.mdlstm_units) != levels_after_convs or not self.conv_filters:
            raise ValueError(f"need {'as many MDLSTM levels as' if self.stem_filters else 'one more MDLSTM level than'}"
                             f" block convolutions, got units {self.mdlstm_units} and filters {self.conv_filters}"
                             + (f" with stem {self.stem_filters}" if self.stem_filters else ""))
        self.blocks = _blocks(block, len(self.conv_filters))
        self.dropout = float(dropout)
        self.cell, self.packing, self.directions = cell, packing, int(directions)
        self.stems = [SameConv2D(filters, kernel=STEM_KERNEL, activation="tanh", name=f"stem{level}")
                      for level, filters in enumerate(self.stem_filters, start=1)]
        self.mdlstms = [MDLSTM2D(units, cell=cell, directions=self.directions, packing=packing,
                                 dropout=self.dropout, name=f"mdlstm{level}")
                        for level, units in enumerate(self.mdlstm_units, start=1)]
        self.convs = [BlockConv2D(filters, block=block_size, activation="tanh", name=f"block_conv{level}")
                      for level, (filters, block_size) in enumerate(zip(self.conv_filters, self.blocks), start=1)]
        self.scores = DirectionSharedDense(self.charset.num_classes, self.directions, name="scores")

    @property
    def width_reduction(self) -> int:
        """Input columns per output column (the product of the block widths)."""
        reduction = 1
        for _, width in self.blocks:
            reduction *= width
        return reduction

    def stages(self) -> list[keras.layers.Layer]:
        """The layers before the scores, in order: MDLSTM and block convolutions alternating from an
        MDLSTM level; with a stem, its convolutions and then alternating from a block convolution."""
        first, second = (self.convs, self.mdlstms) if self.stems else (self.mdlstms, self.convs)
        alternating = [layer for pair in itertools.zip_longest(first, second) for layer in pair if layer is not None]
        return [*self.stems, *alternating]

    @property
    def layer_names(self) -> list[str]:
        return [*(layer.name for layer in self.stages()), self.scores.name, "output"]

    def forward(self, images, training: bool = False) -> Iterator[tuple[str, tf.RaggedTensor]]:
        """Stem, MDLSTM and block conv levels, per-pixel scores, then their sum over the height."""
        features = images
        for layer in self.stages():
            features = layer(features, training=training)
            yield layer.name, features
        per_pixel = self.scores(features)
        yield self.scores.name, per_pixel
        yield "output", tf.reduce_sum(per_pixel, axis=1)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "mdlstm_units": list(self.mdlstm_units),
            "conv_filters": list(self.conv_filters),
            "stem_filters": list(self.stem_filters),
            "block": [list(b) for b in self.blocks],
            "dropout": self.dropout,
            "cell": self.cell,
            "packing": self.packing,
            "directions": self.directions,
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
    stem_filters: Sequence[int] | None = None,
) -> Recognizer:
    """A built :class:`Recognizer` for ``charset``; ``mdlstm_units``/``conv_filters``/``stem_filters``
    default to the ``preset``'s (:data:`PRESETS`: ``"small"`` (2, 10, 50)/(6, 20), ``"small-wide"``
    (4, 10, 50)/(12, 20), ``"large"`` (4, 20, 100)/(12, 40), no stem; ``"small-stem"`` (10, 50)/(12, 20)
    and ``"stem-80"`` (12, 80)/(16, 32), each after a stem of (8, 16)). Sizes given with one more
    MDLSTM level than block convolutions leave no place for a stem: then a preset's stem is dropped
    (``stem_filters`` unset), so that the units and filters of any preset's shape can override a
    stem preset."""
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {preset!r}")
    sizes = PRESETS[preset]
    units = sizes["mdlstm_units"] if mdlstm_units is None else tuple(mdlstm_units)
    filters = sizes["conv_filters"] if conv_filters is None else tuple(conv_filters)
    if stem_filters is None:
        stem_filters = sizes.get("stem_filters", ()) if len(units) == len(filters) else ()
    model = Recognizer(
        charset, mdlstm_units=units, conv_filters=filters, stem_filters=stem_filters,
        block=block, dropout=dropout, cell=cell, packing=packing, input_height=input_height)
    model.build()
    return model
