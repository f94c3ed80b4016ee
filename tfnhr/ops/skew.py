"""Skewing of 2-D maps so that an MDLSTM scan becomes a loop over columns.

Row ``r`` of an ``H x W`` map is shifted right by ``r`` pixels, giving width ``W + H - 1``.
In the skewed grid cell ``(r, c)`` has its left predecessor at ``(r, c - 1)`` and its upper
predecessor at ``(r - 1, c - 1)``, so every column depends only on the previous one.

Both directions are built from pad / reshape / slice only (no gathers, no strided slices), so
they are cheap, exact and differentiable: row ``r`` padded to ``W + H`` and read back with row
length ``W + H - 1`` lands shifted by ``r``.
"""

from __future__ import annotations

import tensorflow as tf


def skew(maps: tf.Tensor) -> tf.Tensor:
    """Shift row ``r`` of ``maps`` right by ``r``.

    Args:
      maps: ``[B, H, W, C]`` tensor (any dtype); ``H, W >= 1``.
    Returns:
      ``[B, H, W + H - 1, C]``; ``out[b, r, r + c] == maps[b, r, c]``, zeros elsewhere.
    """
    shape = tf.shape(maps)
    batch, height, width, channels = shape[0], shape[1], shape[2], shape[3]
    skewed_width = width + height - 1
    padded = tf.pad(maps, [[0, 0], [0, 0], [0, height], [0, 0]])  # rows of length W + H
    flat = tf.reshape(padded, [batch, height * (width + height), channels])
    flat = tf.slice(flat, [0, 0, 0], [-1, height * skewed_width, -1])
    return tf.reshape(flat, [batch, height, skewed_width, channels])


def unskew(skewed: tf.Tensor, width: tf.Tensor | int) -> tf.Tensor:
    """Inverse of :func:`skew`: ``unskew(skew(x), W) == x``.

    Args:
      skewed: ``[B, H, W + H - 1, C]`` tensor.
      width: the unskewed width ``W`` (Python int or scalar int32 tensor).
    Returns:
      ``[B, H, W, C]`` with ``out[b, r, c] == skewed[b, r, r + c]``.
    """
    shape = tf.shape(skewed)
    batch, height, skewed_width, channels = shape[0], shape[1], shape[2], shape[3]
    flat = tf.reshape(skewed, [batch, height * skewed_width, channels])
    flat = tf.pad(flat, [[0, 0], [0, height], [0, 0]])  # H * (L + 1) elements
    rows = tf.reshape(flat, [batch, height, skewed_width + 1, channels])
    return tf.slice(rows, [0, 0, 0, 0], [-1, -1, width, -1])


def skew_mask(mask: tf.Tensor) -> tf.Tensor:
    """Skew a ``[B, H, W]`` validity mask (bool or numeric) to ``[B, H, W + H - 1]``.

    Cells that receive no input pixel (the two triangles) are ``False`` / zero.
    """
    return tf.squeeze(skew(mask[..., tf.newaxis]), axis=-1)


def unskew_mask(skewed_mask: tf.Tensor, width: tf.Tensor | int) -> tf.Tensor:
    """Inverse of :func:`skew_mask`: ``[B, H, W + H - 1]`` -> ``[B, H, W]``."""
    return tf.squeeze(unskew(skewed_mask[..., tf.newaxis], width), axis=-1)
