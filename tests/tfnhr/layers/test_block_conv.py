"""Tests for tfnhr.layers.block_conv.BlockConv2D against a naive NumPy loop over blocks."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.ragged import ragged_stack
from tfnhr.layers.block_conv import BlockConv2D
from tfnhr.ops.packing import pad_batch

SIZES = [(1, 1), (1, 8), (5, 1), (3, 7), (4, 6), (2, 3), (7, 5)]


def naive_block_conv(image: np.ndarray, kernel: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Per output pixel, sum over the block's in-image pixels (outside ones count as zero)."""
    height, width, _ = image.shape
    block_h, block_w, _, filters = kernel.shape
    out = np.zeros((-(-height // block_h), -(-width // block_w), filters))
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            for di in range(block_h):
                for dj in range(block_w):
                    row, col = i * block_h + di, j * block_w + dj
                    if row < height and col < width:
                        out[i, j] += image[row, col] @ kernel[di, dj]
    return out + bias


def _images(sizes, channels=3, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(h, w, channels)).astype(np.float32) for h, w in sizes]


def _layer(filters=4, block=(2, 3), **kwargs):
    return BlockConv2D(filters, block, bias_initializer="random_normal", **kwargs)


@pytest.mark.parametrize("block", [(2, 3), (1, 1), (3, 1), 2])
def test_ragged_matches_naive_loop(block):
    images = _images(SIZES)
    layer = _layer(block=block)
    outputs = layer(ragged_stack(images))
    kernel, bias = layer.kernel.numpy(), layer.bias.numpy()
    assert outputs.shape.as_list() == [len(SIZES), None, None, 4]
    for i, image in enumerate(images):
        np.testing.assert_allclose(outputs[i].to_tensor(), naive_block_conv(image, kernel, bias),
                                   rtol=1e-5, atol=1e-5)


def test_dense_matches_naive_loop_and_ragged():
    images = _images([(5, 7)] * 2)
    layer = _layer()
    dense = layer(np.stack(images))
    assert dense.shape == (2, 3, 3, 4)
    assert layer.compute_output_shape((2, 5, 7, 3)) == (2, 3, 3, 4)
    assert layer.compute_output_shape((None, None, 7, 3)) == (None, None, 3, 4)
    for i, image in enumerate(images):
        np.testing.assert_allclose(dense[i], naive_block_conv(image, layer.kernel.numpy(),
                                                              layer.bias.numpy()),
                                   rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(layer(ragged_stack(images)).to_tensor(), dense, rtol=1e-5, atol=1e-5)


def test_dense_with_mask_equals_ragged_on_padded_batch():
    images = _images(SIZES)
    layer = _layer(activation="tanh")
    padded, mask = pad_batch(ragged_stack(images))
    garbage = tf.where(mask[..., tf.newaxis], padded, 100.0)  # invalid pixels must be ignored
    dense = layer(garbage, mask=mask)
    out_mask = layer.compute_mask(garbage, mask)
    ragged = layer(ragged_stack(images))
    for i, (height, width) in enumerate(SIZES):
        out_h, out_w = -(-height // 2), -(-width // 3)
        expected_mask = np.zeros(out_mask.shape[1:], bool)
        expected_mask[:out_h, :out_w] = True
        np.testing.assert_array_equal(out_mask[i], expected_mask)
        np.testing.assert_allclose(dense[i, :out_h, :out_w], ragged[i].to_tensor(),
                                   rtol=1e-5, atol=1e-5)
    assert layer.compute_mask(garbage, None) is None


def test_ragged_equals_per_example_dense_in_tf_function_with_gradients():
    images = _images(SIZES, seed=1)
    layer = _layer(activation="tanh")
    layer.build((None, None, None, 3))

    @tf.function(input_signature=[tf.RaggedTensorSpec([None, None, None, 3], tf.float32, 2)])
    def ragged_step(batch):
        with tf.GradientTape() as tape:
            tape.watch(batch.flat_values)
            outputs = layer(batch)
            loss = tf.reduce_sum(outputs.flat_values ** 2)
        grads = tape.gradient(loss, [batch.flat_values, layer.kernel, layer.bias])
        return outputs, [tf.convert_to_tensor(g) for g in grads]

    outputs, (grad_x, grad_kernel, grad_bias) = ragged_step(ragged_stack(images))
    want_kernel, want_bias, want_x = 0.0, 0.0, []
    for i, image in enumerate(images):
        x = tf.constant(image[np.newaxis])
        with tf.GradientTape() as tape:
            tape.watch(x)
            single = layer(x)
            loss = tf.reduce_sum(single ** 2)
        g_x, g_kernel, g_bias = tape.gradient(loss, [x, layer.kernel, layer.bias])
        np.testing.assert_allclose(outputs[i].to_tensor(), single[0], rtol=1e-5, atol=1e-5)
        want_x.append(tf.reshape(g_x, [-1, 3]))
        want_kernel += g_kernel
        want_bias += g_bias
    np.testing.assert_allclose(grad_x, tf.concat(want_x, 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grad_kernel, want_kernel, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grad_bias, want_bias, rtol=1e-4, atol=1e-5)


def test_uniform_width_ragged_and_empty_example():
    images = _images([(3, 4), (1, 4)])
    layer = _layer()
    uniform = tf.RaggedTensor.from_row_lengths(np.concatenate(images), [3, 1])
    np.testing.assert_allclose(layer(uniform).flat_values, layer(ragged_stack(images)).flat_values)
    with_empty = tf.RaggedTensor.from_nested_row_lengths(
        np.concatenate([x.reshape(-1, 3) for x in images]), [[3, 0, 1], [4, 4, 4, 4]])
    outputs = layer(with_empty)
    np.testing.assert_array_equal(outputs.row_lengths(), [2, 0, 1])


def test_fit_dense_and_get_config_round_trip():
    layer = _layer(activation="relu", kernel_regularizer="l2", name="merge")
    model = keras.Sequential([keras.Input((5, 7, 3)), layer, keras.layers.Flatten(),
                              keras.layers.Dense(1)])
    model.compile("adam", "mse")
    x = np.random.default_rng(0).normal(size=(8, 5, 7, 3)).astype(np.float32)
    history = model.fit(x, np.ones((8, 1)), epochs=2, batch_size=4, verbose=0)
    assert np.isfinite(history.history["loss"]).all()

    config = layer.get_config()
    clone = BlockConv2D.from_config(config)
    assert clone.get_config() == config
    assert (clone.filters, clone.block, config["block"]) == (4, (2, 3), (2, 3))
    restored = keras.Sequential.from_config(model.get_config())
    restored.set_weights(model.get_weights())
    np.testing.assert_allclose(restored(x), model(x), rtol=1e-6)


@pytest.mark.parametrize("kwargs, match", [
    ({"filters": 0}, "filters"),
    ({"filters": 2.0}, "filters"),
    ({"filters": 2, "block": (0, 2)}, "block"),
    ({"filters": 2, "block": (2, 2, 2)}, "block"),
    ({"filters": 2, "block": 1.5}, "block"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BlockConv2D(**kwargs)


def test_bad_inputs():
    layer = _layer()
    with pytest.raises(ValueError, match=r"\[B, H, W, C\]"):
        layer(tf.zeros([2, 4, 3]))
    layer(tf.zeros([1, 4, 6, 3]))
    with pytest.raises(ValueError, match="channels"):
        layer(tf.zeros([1, 4, 6, 2]))
    with pytest.raises(ValueError, match="channels"):
        layer(ragged_stack(_images([(2, 2)], channels=5)))
    with pytest.raises(ValueError, match="mask"):
        layer(ragged_stack(_images([(2, 2)])), mask=tf.ones([1, 2, 2], tf.bool))


def test_mixed_precision_policy():
    layer = _layer(dtype="mixed_float16")
    images = _images([(3, 4), (2, 5)])
    assert layer(ragged_stack(images)).dtype == tf.float16
    assert layer(np.stack(_images([(3, 4)] * 2))).dtype == tf.float16
    assert layer.kernel.dtype == "float32"
