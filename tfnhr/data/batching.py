"""Turning lists of variable-size images into the ragged batches the layers take."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf


def to_ragged_images(images: Sequence[np.ndarray]) -> tf.RaggedTensor:
    """``[H_i, W_i, C]`` arrays -> float32 ``tf.RaggedTensor [B, (H), (W), C]``.

    Built from the flat pixels and the row lengths (no per-element Python conversion).
    """
    if not images:
        raise ValueError("no images to batch")
    channels = {image.shape[-1] for image in images}
    if len(channels) != 1 or any(image.ndim != 3 or 0 in image.shape for image in images):
        raise ValueError("images must be non-empty [H, W, C] arrays with one channel count")
    pixels = np.concatenate([image.reshape(-1, image.shape[-1]) for image in images]).astype(np.float32)
    heights = [image.shape[0] for image in images]
    widths = np.repeat([image.shape[1] for image in images], heights)
    return tf.RaggedTensor.from_nested_row_lengths(pixels, [heights, widths])


def to_ragged_labels(labels: Sequence[Sequence[int]]) -> tf.RaggedTensor:
    """Label sequences -> int32 ``tf.RaggedTensor [B, (L)]``."""
    flat = np.array([index for label in labels for index in label], dtype=np.int32)
    return tf.RaggedTensor.from_row_lengths(flat, [len(label) for label in labels])
