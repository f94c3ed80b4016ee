"""Low-level TensorFlow ops: skewing (:mod:`tfnhr.ops.skew`)."""

from tfnhr.ops.skew import skew, skew_mask, unskew, unskew_mask

__all__ = ["skew", "unskew", "skew_mask", "unskew_mask"]
