"""Low-level TensorFlow ops: skewing (:mod:`tfnhr.ops.skew`) and example packing (:mod:`tfnhr.ops.packing`).

May import: tfnhr.config.
"""

from tfnhr.ops.packing import (PackingLayout, Placement, pack, pack_ragged_graph, pad_batch, plan_packing,
                               plan_padding, unpack, unpad_batch)
from tfnhr.ops.skew import skew, skew_mask, unskew, unskew_mask

__all__ = ["skew", "unskew", "skew_mask", "unskew_mask", "PackingLayout", "Placement", "plan_packing",
           "plan_padding", "pack", "unpack", "pack_ragged_graph", "pad_batch", "unpad_batch"]
