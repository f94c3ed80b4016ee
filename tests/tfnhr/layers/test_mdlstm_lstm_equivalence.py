"""``MDLSTM2D(cell="lstm", directions=1)`` on a height-1 image computes ``keras.layers.LSTM``.

Keras' LSTM is an independent reference for the 2-D LSTM cell: copy its gates ``[i, f, c, o]``
into the MDLSTM's ``[i, f1, a, o]`` and leave the peephole weights zero. Every cell of a height-1
image has the zero border as its upper predecessor (``h2 = s2 = 0``), so the second forget gate
``f2`` and the ``h2`` rows cannot matter (they get random values here to show it), and
``s = i a + f1 s1``, ``y = o tanh(s)`` is Keras' cell. benchmarks/lstm_speed.py relies on this.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfnhr.layers.mdlstm import MDLSTM2D

C, U = 5, 6
ATOL = 2e-5


def _layers(seed: int = 0, **kwargs):
    """A Keras LSTM with random weights (bias included) and an MDLSTM2D computing the same."""
    rng = np.random.default_rng(seed)
    lstm = keras.layers.LSTM(U, return_sequences=True)
    lstm.build((None, None, C))
    kernel, recurrent, bias = (rng.uniform(-0.6, 0.6, w.shape).astype(np.float32)
                               for w in lstm.get_weights())
    lstm.set_weights([kernel, recurrent, bias])
    layer = MDLSTM2D(U, cell="lstm", directions=1, **kwargs)
    layer.build((None, 1, None, C))

    def to_mdlstm(w):  # Keras [..., i f c o] -> MDLSTM [..., i f1 f2 a o], f2 random
        i, f, c, o = np.split(w, 4, axis=-1)
        return np.concatenate([i, f, rng.uniform(-1, 1, i.shape), c, o], -1).astype(np.float32)

    layer.kernel.assign(to_mdlstm(kernel)[None])
    h2_rows = rng.uniform(-1, 1, (U, 5 * U)).astype(np.float32)  # on the zero border's h2
    layer.recurrent_kernel.assign(np.concatenate([to_mdlstm(recurrent), h2_rows])[None])
    layer.bias.assign(to_mdlstm(bias)[None])
    layer.peephole_kernel.assign(np.zeros(layer.peephole_kernel.shape, np.float32))
    layer.output_peephole_kernel.assign(np.zeros(layer.output_peephole_kernel.shape, np.float32))
    return lstm, layer


def _without_f2(w: np.ndarray) -> np.ndarray:
    i, f1, _, a, o = np.split(w, 5, axis=-1)
    return np.concatenate([i, f1, a, o], -1)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_dense_height1_matches_keras_lstm_with_gradients(jit_compile):
    lstm, layer = _layers(jit_compile=jit_compile)
    x = tf.constant(np.random.default_rng(1).normal(0, 2, (3, 17, C)).astype(np.float32))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y_ref = lstm(x)
        loss_ref = tf.reduce_sum(y_ref ** 2)
    grads_ref = tape.gradient(loss_ref, [x] + lstm.trainable_weights)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x[:, tf.newaxis])[:, 0]
        loss = tf.reduce_sum(y ** 2)
    dx, dkernel, drecurrent, _, _, dbias = tape.gradient(loss, [x] + layer.trainable_weights)

    assert float(tf.reduce_max(tf.abs(y_ref))) > 0.3  # not a saturated or vanishing case
    np.testing.assert_allclose(y, y_ref, atol=ATOL)
    np.testing.assert_allclose(dx, grads_ref[0], atol=ATOL)
    np.testing.assert_allclose(_without_f2(dkernel.numpy()[0]), grads_ref[1], atol=ATOL)
    np.testing.assert_allclose(_without_f2(drecurrent.numpy()[0, :U]), grads_ref[2], atol=ATOL)
    np.testing.assert_allclose(_without_f2(dbias.numpy()[0]), grads_ref[3], atol=ATOL)


def test_packed_ragged_height1_matches_masked_keras_lstm():
    lstm, layer = _layers(seed=2)
    lengths = np.array([17, 5, 11, 3, 9])
    rng = np.random.default_rng(3)
    flat = tf.constant(rng.normal(0, 2, (int(lengths.sum()), C)).astype(np.float32))
    ragged = tf.RaggedTensor.from_nested_row_lengths(
        flat, [np.ones(len(lengths), np.int64), lengths.astype(np.int64)])
    padded = tf.RaggedTensor.from_row_lengths(flat, lengths).to_tensor()
    mask = tf.sequence_mask(lengths, int(lengths.max()))

    y = layer(ragged)  # packing="examples": several sequences share a packed row
    y_ref = lstm(padded, mask=mask)

    valid = mask.numpy()
    np.testing.assert_allclose(y.flat_values, y_ref.numpy()[valid], atol=ATOL)
