"""Capsule layers and losses against NumPy references and closed forms."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from capsnet.capsules import CapsuleLength, CapsuleMask, PrimaryCapsules, RoutingCapsules, squash
from capsnet.losses import margin_loss, reconstruction_loss
from tests.helpers.capsule_reference import routing_reference, squash_reference


def test_squash_matches_closed_form_keeps_direction_and_bounds_norm():
    rng = np.random.default_rng(0)
    s = rng.normal(size=(6, 5, 8)) * rng.uniform(0.01, 20, size=(6, 5, 1))
    v = squash(tf.constant(s, tf.float32)).numpy()
    np.testing.assert_allclose(v, squash_reference(s), rtol=1e-4, atol=1e-6)
    norms = np.linalg.norm(v, axis=-1)
    assert np.all(norms < 1.0)
    cosine = np.sum(v * s, -1) / (norms * np.linalg.norm(s, axis=-1))
    np.testing.assert_allclose(cosine, 1.0, atol=1e-5)
    # |s| = 1 -> 1/2, |s| = 3 -> 9/10 (|s|²/(1+|s|²)).
    unit = squash(tf.constant([[1.0, 0.0], [0.0, 3.0]])).numpy()
    np.testing.assert_allclose(np.linalg.norm(unit, axis=-1), [0.5, 0.9], rtol=1e-5)


def test_squash_of_zero_is_zero_with_finite_gradient():
    s = tf.zeros((2, 4))
    with tf.GradientTape() as tape:
        tape.watch(s)
        v = squash(s)
    assert np.all(v.numpy() == 0)
    assert np.all(np.isfinite(tape.gradient(v, s).numpy()))


@pytest.mark.parametrize("routings", [1, 3])
def test_routing_matches_numpy_reference(routings):
    rng = np.random.default_rng(routings)
    u = rng.normal(size=(3, 7, 4)).astype(np.float32)
    layer = RoutingCapsules(capsules=5, dim=6, routings=routings)
    layer.build(u.shape)
    kernel = rng.normal(scale=0.5, size=(7, 4, 30)).astype(np.float32)
    layer.kernel.assign(kernel)
    v_ref, s_ref, _ = routing_reference(u.astype(np.float64), kernel.astype(np.float64), 5, routings)
    np.testing.assert_allclose(layer(tf.constant(u)).numpy(), v_ref, rtol=2e-4, atol=1e-5)
    unsquashed = RoutingCapsules(capsules=5, dim=6, routings=routings, squash_output=False)
    unsquashed.build(u.shape)
    unsquashed.kernel.assign(kernel)
    np.testing.assert_allclose(unsquashed(tf.constant(u)).numpy(), s_ref, rtol=2e-4, atol=1e-5)


def test_routing_changes_coupling_away_from_uniform():
    """With 3 iterations the result differs from 1 (uniform coupling): routing is not a no-op."""
    rng = np.random.default_rng(1)
    u = rng.normal(size=(2, 9, 4)).astype(np.float32)
    kernel = rng.normal(size=(9, 4, 12)).astype(np.float32)
    v1 = routing_reference(u, kernel, 3, 1)[0]
    v3 = routing_reference(u, kernel, 3, 3)[0]
    assert np.abs(v1 - v3).max() > 1e-2


def kernel_gradient(layer: RoutingCapsules, u: np.ndarray, weights: np.ndarray) -> np.ndarray:
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(tf.constant(u)) * weights)
    return tape.gradient(loss, layer.kernel).numpy()


def test_routing_gradients():
    """Full gradient = central differences of the NumPy reference; the stopped gradient = the
    gradient with the last coupling coefficients held constant (float64 throughout)."""
    rng = np.random.default_rng(6)
    u, kernel = rng.normal(size=(2, 4, 3)), rng.normal(scale=0.7, size=(4, 3, 6))
    weights = rng.normal(size=(2, 3, 2))
    layers = {stop: RoutingCapsules(3, 2, routings=3, stop_routing_gradient=stop, dtype="float64") for stop in (0, 1)}
    for layer in layers.values():
        layer.build(u.shape)
        layer.kernel.assign(kernel)

    def loss(k, coupling=None):
        if coupling is None:
            return np.sum(routing_reference(u, k, 3, 3)[0] * weights)
        u_hat = np.einsum("bid,idjk->bijk", u, k.reshape(4, 3, 3, 2))
        return np.sum(squash_reference(np.einsum("bij,bijk->bjk", coupling, u_hat)) * weights)

    coupling = routing_reference(u, kernel, 3, 3)[2]
    for stop, fixed in ((0, None), (1, coupling)):
        numeric = np.zeros_like(kernel)
        for index in np.ndindex(kernel.shape):
            step = np.zeros_like(kernel)
            step[index] = 1e-6
            numeric[index] = (loss(kernel + step, fixed) - loss(kernel - step, fixed)) / 2e-6
        np.testing.assert_allclose(kernel_gradient(layers[stop], u, weights), numeric, rtol=1e-5, atol=1e-7)
    assert np.abs(kernel_gradient(layers[0], u, weights) - kernel_gradient(layers[1], u, weights)).max() > 1e-3


def test_routing_is_batch_size_agnostic():
    """One traced function serves any batch size, and an example's output does not depend on its batch."""
    rng = np.random.default_rng(2)
    layer = RoutingCapsules(capsules=3, dim=4, routings=3)
    layer.build((None, 6, 5))
    run = tf.function(layer.call, input_signature=[tf.TensorSpec([None, 6, 5], tf.float32)])
    batch = rng.normal(size=(5, 6, 5)).astype(np.float32)
    together = run(tf.constant(batch)).numpy()
    alone = np.concatenate([run(tf.constant(batch[i:i + 1])).numpy() for i in range(5)])
    np.testing.assert_allclose(together, alone, rtol=1e-5, atol=1e-6)
    assert len(run._list_all_concrete_functions()) == 1


def test_primary_capsules_shape_and_squashed_groups():
    layer = PrimaryCapsules(channels=4, dim=8, kernel_size=9, strides=2)
    images = tf.random.uniform((2, 20, 20, 3), seed=3)  # CapsNet: 28 -> conv1 -> 20
    capsules = layer(images)
    assert capsules.shape == (2, 6 * 6 * 4, 8) == layer.compute_output_shape((2, 20, 20, 3))
    maps = layer.conv(images).numpy().reshape(2, -1, 8)
    np.testing.assert_allclose(capsules.numpy(), squash_reference(maps.astype(np.float64)), rtol=1e-4, atol=1e-6)


def test_length_and_mask():
    rng = np.random.default_rng(4)
    capsules = rng.normal(size=(3, 4, 2)).astype(np.float32)
    np.testing.assert_allclose(CapsuleLength()(capsules).numpy(), np.linalg.norm(capsules, axis=-1), rtol=1e-5)
    labels = np.array([2, 0, 3])
    by_label = CapsuleMask()(tf.constant(capsules), tf.constant(labels)).numpy().reshape(3, 4, 2)
    by_one_hot = CapsuleMask()(tf.constant(capsules), tf.one_hot(labels, 4)).numpy().reshape(3, 4, 2)
    longest = np.argmax(np.linalg.norm(capsules, axis=-1), axis=-1)
    by_length = CapsuleMask()(tf.constant(capsules)).numpy().reshape(3, 4, 2)
    for b in range(3):
        for j in range(4):
            np.testing.assert_array_equal(by_label[b, j], capsules[b, j] if j == labels[b] else 0)
            np.testing.assert_array_equal(by_length[b, j], capsules[b, j] if j == longest[b] else 0)
    np.testing.assert_array_equal(by_label, by_one_hot)


def test_margin_loss_closed_form():
    lengths = np.array([[0.95, 0.30, 0.05], [0.50, 0.10, 0.80]], np.float32)
    labels = np.array([0, 2])
    # Example 0: present 0.95 > m+ -> 0; absent 0.30 -> 0.5·0.2²; 0.05 < m- -> 0.
    # Example 1: present 0.80 -> (0.1)²; absent 0.50 -> 0.5·0.4²; 0.10 = m- -> 0.
    expected = [0.5 * 0.2**2, 0.1**2 + 0.5 * 0.4**2]
    np.testing.assert_allclose(margin_loss(labels, lengths).numpy(), expected, rtol=1e-5)
    np.testing.assert_allclose(margin_loss(tf.one_hot(labels, 3), lengths).numpy(), expected, rtol=1e-5)


def test_reconstruction_loss_is_weighted_mean_squared_error():
    rng = np.random.default_rng(5)
    images, recon = rng.uniform(size=(2, 4, 4, 1)), rng.uniform(size=(2, 4, 4, 1))
    expected = 0.392 * ((images - recon) ** 2).reshape(2, -1).mean(axis=1)
    got = reconstruction_loss(tf.constant(images, tf.float32), tf.constant(recon, tf.float32)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_layers_round_trip_through_config():
    layer = RoutingCapsules(capsules=3, dim=2, routings=4, squash_output=False, stop_routing_gradient=False, name="r")
    clone = RoutingCapsules.from_config(layer.get_config())
    assert (clone.capsules, clone.dim, clone.routings, clone.squash_output, clone.stop_routing_gradient) == (
        3, 2, 4, False, False)
    primary = PrimaryCapsules.from_config(PrimaryCapsules(5, 4, kernel_size=3, strides=1).get_config())
    assert (primary.channels, primary.dim, primary.kernel_size, primary.strides) == (5, 4, 3, 1)
