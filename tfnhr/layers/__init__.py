"""Keras 3 layers on ragged image batches ``[B, (H), (W), C]`` and sequence batches ``[B, (T), C]``:
:class:`MDLSTM2D` (skewed multi-directional MDLSTM), :class:`BlockConv2D`,
:class:`DirectionSharedDense`, :class:`SequenceLSTM` (1-D LSTM along the width) and the small
ragged-aware :class:`SameConv2D`, :class:`RaggedDropout` and :class:`SumOverHeight`, and :class:`CtcScores`
(per-column class scores for CTC, the ``ctc`` layer of config networks).

May import: tfnhr.config, tfnhr.ops.
"""

from tfnhr.layers.block_conv import BlockConv2D
from tfnhr.layers.ctc_scores import CtcScores
from tfnhr.layers.dense import DirectionSharedDense
from tfnhr.layers.mdlstm import MDLSTM2D
from tfnhr.layers.ragged import RaggedDropout, SameConv2D, SumOverHeight
from tfnhr.layers.sequence_lstm import SequenceLSTM

__all__ = ["MDLSTM2D", "BlockConv2D", "DirectionSharedDense", "SequenceLSTM", "SameConv2D", "RaggedDropout",
           "SumOverHeight", "CtcScores"]
