"""Mixed precision: which Keras dtype policy for training, and building (or loading) a model under one.

On a GPU ``mixed_float16`` (tensor cores; Keras wraps the optimizer in a loss-scaling optimizer at
``compile``); on a CPU ``mixed_bfloat16`` (float16 has no fast CPU kernels; bfloat16 has the
float32 exponent range, so no loss scaling). Variables stay float32 either way, and so do the
MDLSTM's recurrence (:class:`~tfnhr.layers.MDLSTM2D` computes in its variable dtype and casts its
output to the policy's compute dtype) and the CTC loss (float32 scores).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import keras
import tensorflow as tf


def mixed_policy_name() -> str:
    """``"mixed_float16"`` when TensorFlow sees a GPU, else ``"mixed_bfloat16"``."""
    return "mixed_float16" if tf.config.list_physical_devices("GPU") else "mixed_bfloat16"


@contextlib.contextmanager
def dtype_policy(name: str | None) -> Iterator[None]:
    """Layers built inside get the Keras dtype policy ``name`` (``None``: leave the current one);
    the previous global policy is restored on leaving, so a notebook's later models are unaffected."""
    previous = keras.config.dtype_policy()
    if name is not None:
        keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)
