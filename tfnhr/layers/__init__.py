"""Keras 3 layers: :class:`MDLSTM2D` (skewed multi-directional MDLSTM) and :class:`BlockConv2D`."""

from tfnhr.layers.block_conv import BlockConv2D
from tfnhr.layers.mdlstm import MDLSTM2D

__all__ = ["MDLSTM2D", "BlockConv2D"]
