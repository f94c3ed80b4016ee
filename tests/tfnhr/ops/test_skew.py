"""skew / unskew against a per-pixel NumPy loop; exact inverses; masks; gradients."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfnhr.ops.skew import skew, skew_mask, unskew, unskew_mask

SIZES = [(1, 1), (1, 6), (5, 1), (3, 4), (4, 3), (7, 9)]


def naive_skew(maps: np.ndarray) -> np.ndarray:
    """Row r shifted right by r, one pixel at a time."""
    batch, height, width, channels = maps.shape
    out = np.zeros((batch, height, width + height - 1, channels), maps.dtype)
    for r in range(height):
        for c in range(width):
            out[:, r, r + c] = maps[:, r, c]
    return out


@pytest.mark.parametrize("height, width", SIZES)
def test_skew_matches_naive_loop_and_unskew_inverts_it(height, width):
    maps = np.random.default_rng(height * 10 + width).normal(size=(2, height, width, 3)).astype(np.float32)
    skewed = skew(tf.constant(maps)).numpy()
    np.testing.assert_array_equal(skewed, naive_skew(maps))
    np.testing.assert_array_equal(unskew(tf.constant(skewed), width).numpy(), maps)


@pytest.mark.parametrize("height, width", SIZES)
def test_mask_skew_marks_exactly_the_shifted_pixels(height, width):
    mask = np.random.default_rng(width).random((2, height, width)) > 0.3
    skewed = skew_mask(tf.constant(mask)).numpy()
    assert skewed.dtype == bool
    np.testing.assert_array_equal(skewed, naive_skew(mask[..., None])[..., 0])
    np.testing.assert_array_equal(unskew_mask(tf.constant(skewed), width).numpy(), mask)


def test_skew_gradient_is_unskew_and_works_with_unknown_shapes():
    maps = tf.constant(np.random.default_rng(0).normal(size=(2, 4, 5, 2)), tf.float32)
    upstream = tf.constant(np.random.default_rng(1).normal(size=(2, 4, 8, 2)), tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(maps)
        value = tf.reduce_sum(skew(maps) * upstream)
    np.testing.assert_allclose(tape.gradient(value, maps).numpy(), unskew(upstream, 5).numpy(), rtol=1e-6)

    @tf.function(input_signature=[tf.TensorSpec([None, None, None, None], tf.float32)])
    def round_trip(x):
        return unskew(skew(x), tf.shape(x)[2])

    for shape in [(1, 3, 2, 1), (3, 1, 7, 2)]:
        x = np.random.default_rng(2).normal(size=shape).astype(np.float32)
        np.testing.assert_array_equal(round_trip(x).numpy(), x)
