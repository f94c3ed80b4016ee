"""``ragged_stack``: a batch of variable-size images as a ragged tensor, built independently of
the library's own batching code (:mod:`tfnhr.data.dataset`, :mod:`tfnhr.ops.packing`)."""

from __future__ import annotations

import tensorflow as tf


def ragged_stack(images) -> tf.RaggedTensor:
    """``[H, W, C]`` arrays -> ragged ``[B, (H), (W), C]`` by ``tf.ragged.stack`` (independent of
    the library's own batching code)."""
    return tf.ragged.stack([tf.RaggedTensor.from_tensor(tf.constant(x)) for x in images])
