"""Tests of the MDLSTM2D layer against an independent NumPy reference and of its properties."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.mdlstm_reference import reference_mdlstm
from tfnhr.layers.mdlstm import MDLSTM2D

CELLS = ("leaky_lp", "leaky_lp_new_state", "lstm")
SCAN_KERNELS = ("compiled", "ops")


def make_layer(units=3, channels=2, scale=0.7, seed=0, **kwargs) -> MDLSTM2D:
    """A built layer with random weights ``N(0, scale^2)`` (all biases too, so every term of
    every gate matters), XLA off to keep the tests fast unless asked for."""
    kwargs.setdefault("jit_compile", False)
    layer = MDLSTM2D(units, **kwargs)
    layer.build((None, None, None, channels))
    rng = np.random.default_rng(seed)
    for v in layer.weights:
        v.assign(rng.normal(size=v.shape) * scale)
    return layer


def rand(shape, seed=1, scale=1.0, dtype=np.float32):
    return (np.random.default_rng(seed).normal(size=shape) * scale).astype(dtype)


# ------------------------------------------------------------------ reference


@pytest.mark.parametrize("kernel", SCAN_KERNELS)
@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize(  # units >= SPLIT_MIN_UNITS: peephole gates in their own matmul
    "directions,projection,units",
    [(1, "auto", 3), (2, "auto", 9), (4, "in_loop", 3), (4, "precompute", 9)],
)
def test_matches_naive_reference(cell, directions, projection, units, kernel):
    layer = make_layer(units=units, cell=cell, directions=directions, input_projection=projection,
                       scan_kernel=kernel)
    for k, (h, w) in enumerate([(1, 5), (4, 1), (3, 4)]):
        x = rand((2, h, w, 2), seed=k)
        mask = np.random.default_rng(k).random((2, h, w)) > 0.3 if k != 1 else None
        out = layer(x, mask=mask).numpy()
        assert out.shape == (2, h, w, units * directions)
        np.testing.assert_allclose(out, reference_mdlstm(layer, x, mask), atol=1e-5)
        if mask is not None:
            assert np.all(out[~mask] == 0.0)


@pytest.mark.parametrize("units", [3, 9])
def test_xla_matches_reference_and_plain_gradients(units):
    xla = make_layer(units=units, directions=4, jit_compile=True)
    plain = make_layer(units=units, directions=4, jit_compile=False)
    x = tf.constant(rand((2, 3, 5, 2)))
    grads = []
    for layer in (xla, plain):
        with tf.GradientTape() as tape:
            tape.watch(x)
            out = layer(x)
            loss = tf.reduce_sum(out * out)
        grads.append(tape.gradient(loss, [x] + layer.trainable_weights))
    np.testing.assert_allclose(out.numpy(), reference_mdlstm(xla, x.numpy()), atol=1e-5)
    for a, b in zip(*grads):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5, rtol=1e-5)


def test_float64_matches_reference_tightly():
    layer = make_layer(directions=2, dtype="float64")
    x = rand((2, 3, 4, 2), dtype=np.float64)
    out = layer(x)
    assert out.dtype == tf.float64
    np.testing.assert_allclose(out.numpy(), reference_mdlstm(layer, x), atol=1e-12)


def test_inside_tf_function_with_unknown_shapes():
    layer = make_layer(directions=4)
    fn = tf.function(
        lambda x: layer(x), input_signature=[tf.TensorSpec([None, None, None, 2], tf.float32)]
    )
    for shape in [(1, 1, 1, 2), (3, 4, 2, 2)]:
        x = rand(shape)
        np.testing.assert_allclose(fn(x).numpy(), reference_mdlstm(layer, x), atol=1e-5)


# ------------------------------------------------------------------ dependency structure


QUADRANT = {  # direction -> does output (i, j) see input (a, b)?
    0: lambda i, j, a, b: a <= i and b <= j,
    1: lambda i, j, a, b: a <= i and b >= j,
    2: lambda i, j, a, b: a >= i and b <= j,
    3: lambda i, j, a, b: a >= i and b >= j,
}


def test_dependency_cone_one_direction():
    """Perturbing input (i0, j0) changes exactly the outputs (i, j) with i >= i0, j >= j0."""
    layer = make_layer(directions=1, dtype="float64")
    x = rand((1, 5, 6, 2), dtype=np.float64)
    base = layer(x).numpy()
    for i0, j0 in [(0, 0), (2, 3), (4, 5), (1, 0), (0, 4)]:
        x2 = x.copy()
        x2[0, i0, j0] += 0.5
        changed = np.abs(layer(x2).numpy() - base).max(axis=-1)[0] > 0
        expected = np.zeros_like(changed)
        expected[i0:, j0:] = True
        np.testing.assert_array_equal(changed, expected)


def test_each_direction_sees_exactly_its_quadrant():
    """Gradients of every output of every direction w.r.t. the input: nonzero exactly on that
    direction's scan quadrant (so with 4 directions every output depends on every input)."""
    height, width, units = 3, 4, 2
    layer = make_layer(units=units, directions=4, dtype="float64")
    # One copy of the image per direction on the batch axis; copy d's loss is direction d's
    # output at (i, j), so one backward pass gives all four supports.
    x = tf.constant(np.repeat(rand((1, height, width, 2), dtype=np.float64), 4, axis=0))
    select = tf.constant(np.kron(np.eye(4), np.ones((1, units))))  # [copy d, channel]

    @tf.function
    def jacobian_support(i, j):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x)[:, i, j] * select)
        return tf.reduce_sum(tf.abs(tape.gradient(loss, x)), -1)

    for i in range(height):
        for j in range(width):
            support = jacobian_support(tf.constant(i), tf.constant(j)).numpy() > 0
            assert support.any(axis=0).all()
            for d in range(4):
                expected = [[QUADRANT[d](i, j, a, b) for b in range(width)] for a in range(height)]
                np.testing.assert_array_equal(support[d], expected, err_msg=f"({i},{j}) d={d}")


# ------------------------------------------------------------------ stability


@pytest.mark.parametrize("cell", ["leaky_lp", "leaky_lp_new_state"])
def test_leaky_lp_states_stay_bounded_on_large_images(cell):
    layer = make_layer(units=2, channels=3, directions=1, cell=cell, scale=10.0)
    x = rand((1, 256, 256, 3), scale=10.0)
    memory = layer.memory(x).numpy()
    assert np.abs(memory).max() <= 1.0 + 1e-6
    assert np.isfinite(layer(x).numpy()).all()


def test_lstm_state_is_unbounded():
    """The Graves cell's f1 + f2 can exceed 1: its state grows far beyond [-1, 1]."""
    layer = make_layer(units=2, channels=3, directions=1, cell="lstm", scale=10.0)
    memory = layer.memory(rand((1, 256, 256, 3), scale=10.0)).numpy()
    assert not np.all(np.abs(memory) <= 1.0)
    assert np.nanmax(np.abs(memory)) > 100.0


# ------------------------------------------------------------------ gradients


@pytest.mark.parametrize("kernel", SCAN_KERNELS)
@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("projection,units", [("in_loop", 2), ("precompute", 8)])
def test_gradient_matches_finite_differences(cell, projection, units, kernel):
    """Directional derivatives (float64, central differences) of a random projection of the
    output, w.r.t. the input and every weight, along random directions."""
    layer = make_layer(units=units, directions=4, cell=cell, input_projection=projection,
                       dtype="float64", scan_kernel=kernel)
    x = tf.constant(rand((2, 3, 4, 2), dtype=np.float64))
    mask = np.random.default_rng(3).random((2, 3, 4)) > 0.2
    probe = tf.constant(rand((2, 3, 4, 4 * units), seed=4, dtype=np.float64))
    variables = layer.trainable_weights

    def loss(x):
        return tf.reduce_sum(layer(x, mask=mask) * probe)

    with tf.GradientTape() as tape:
        tape.watch(x)
        value = loss(x)
    grads = tape.gradient(value, [x] + variables)
    rng = np.random.default_rng(5)
    directions = [rng.normal(size=g.shape) for g in grads]
    analytic = sum(float(np.sum(g.numpy() * d)) for g, d in zip(grads, directions))
    eps = 1e-6
    originals = [v.numpy() for v in variables]

    def shifted(sign):
        for v, o, d in zip(variables, originals, directions[1:]):
            v.assign(o + sign * eps * d)
        return float(loss(x + sign * eps * directions[0]))

    numeric = (shifted(1) - shifted(-1)) / (2 * eps)
    for v, o in zip(variables, originals):
        v.assign(o)
    assert abs(numeric - analytic) <= 1e-6 * max(1.0, abs(analytic))


# ------------------------------------------------------------------ API


def test_config_round_trip_and_save_load(tmp_path):
    layer = make_layer(directions=2, cell="lstm", dropout=0.25, input_projection="precompute",
                       packing_height_step=8, scan_kernel="ops")
    config = layer.get_config()
    assert config["packing_height_step"] == 8
    assert config["scan_kernel"] == "ops"
    clone = MDLSTM2D.from_config(config)
    assert clone.get_config() == config
    inputs = keras.Input((None, None, 2))
    model = keras.Model(inputs, layer(inputs))
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    x = rand((1, 3, 4, 2))
    np.testing.assert_allclose(loaded(x).numpy(), model(x).numpy(), atol=1e-6)


def test_invalid_inputs_raise_value_error():
    layer = make_layer(channels=2)
    for bad in [
        np.zeros((2, 3, 2), np.float32),  # wrong rank
        np.zeros((1, 2, 3, 4), np.float32),  # channel mismatch
        np.zeros((0, 2, 3, 2), np.float32),  # empty batch
        np.zeros((1, 0, 3, 2), np.float32),  # zero-size image
        np.zeros((1, 2, 0, 2), np.float32),
    ]:
        with pytest.raises(ValueError):
            layer(bad)
    with pytest.raises(ValueError):
        layer(np.zeros((1, 2, 3, 2), np.float32), mask=np.ones((1, 2), bool))
    for kwargs in [
        {"units": 0}, {"units": 2, "cell": "gru"}, {"units": 2, "directions": 3},
        {"units": 2, "packing": "none"}, {"units": 2, "dropout": 1.0},
        {"units": 2, "input_projection": "x"}, {"units": 2, "jit_compile": "yes"},
        {"units": 2, "packing_max_width": 0}, {"units": 2, "packing_height_step": 0},
        {"units": 2, "packing_height_step": 2.5}, {"units": 2, "packing_height_step": True},
        {"units": 2, "scan_kernel": "fast"}, {"units": 2, "scan_kernel": "compiled", "jit_compile": True},
    ]:
        with pytest.raises(ValueError):
            MDLSTM2D(**kwargs)


def test_dropout_only_in_training():
    layer = make_layer(directions=1, dropout=0.5)
    x = rand((2, 3, 4, 2))
    inference = layer(x).numpy()
    np.testing.assert_array_equal(layer(x, training=False).numpy(), inference)
    trained = layer(x, training=True).numpy()
    dropped = trained == 0
    assert 0.2 < dropped.mean() < 0.8
    np.testing.assert_allclose(trained[~dropped], 2 * inference[~dropped], rtol=1e-6)


def test_mixed_precision_computes_recurrence_in_float32():
    reference = make_layer(directions=2)
    mixed = make_layer(directions=2, dtype="mixed_float16")
    for v, w in zip(mixed.weights, reference.weights):
        v.assign(w)
    x = rand((2, 3, 4, 2))
    out = mixed(x.astype(np.float16))
    assert out.dtype == tf.float16
    assert all(v.dtype == "float32" for v in mixed.weights)
    np.testing.assert_allclose(out.numpy(), reference(x).numpy(), atol=2e-3)


def test_mask_is_propagated_for_stacking():
    first, second = make_layer(units=2, directions=2), make_layer(units=3, channels=4, seed=1)
    x = rand((2, 3, 4, 2))
    mask = np.random.default_rng(0).random((2, 3, 4)) > 0.3
    np.testing.assert_array_equal(first.compute_mask(x, mask), mask)
    hidden = first(x, mask=mask)
    np.testing.assert_allclose(
        second(hidden, mask=mask).numpy(), reference_mdlstm(second, hidden.numpy(), mask),
        atol=1e-5,
    )


@pytest.mark.slow
def test_model_fit_reduces_loss():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4, 6, 2))
    hidden = MDLSTM2D(4, directions=2)(inputs)  # dense input: XLA by default
    model = keras.Model(inputs, keras.layers.Dense(1)(hidden))
    model.compile(keras.optimizers.Adam(0.02), "mse")
    x = rand((16, 4, 6, 2))
    y = np.cumsum(x[..., :1], axis=2) * 0.3  # needs the left-to-right context
    history = model.fit(x, y, batch_size=8, epochs=15, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.6 * losses[0]


# ------------------------------------------------------------------ ragged input


def ragged_batch(count=13, seed=0, max_height=6, max_width=12, channels=2):
    rng = np.random.default_rng(seed)
    images = [
        rng.normal(size=(rng.integers(1, max_height + 1), rng.integers(1, max_width + 1),
                         channels)).astype(np.float32)
        for _ in range(count)
    ]
    return images, tf.ragged.stack([tf.constant(image) for image in images])


def outputs_and_gradients(layer, inputs, probes):
    """Per-example outputs, and gradients of sum(outputs * probes) w.r.t. each example's input
    and the weights; ``inputs`` is a ragged batch or a list of single examples."""
    with tf.GradientTape() as tape:
        if isinstance(inputs, tf.RaggedTensor):
            tape.watch(inputs.flat_values)
            ragged = layer(inputs)
            outs = [ragged[k].numpy() for k in range(len(probes))]
            loss = tf.reduce_sum(ragged.flat_values * tf.concat(
                [tf.reshape(p, [-1, p.shape[-1]]) for p in probes], 0))
        else:
            tensors = [tf.constant(image[None]) for image in inputs]
            for t in tensors:
                tape.watch(t)
            results = [layer(t)[0] for t in tensors]
            outs = [r.numpy() for r in results]
            loss = tf.add_n([tf.reduce_sum(r * p) for r, p in zip(results, probes)])
    sources = [inputs.flat_values] if isinstance(inputs, tf.RaggedTensor) else tensors
    grads = tape.gradient(loss, sources + layer.trainable_weights)
    if isinstance(inputs, tf.RaggedTensor):
        input_grads = [g.numpy() for g in inputs.with_flat_values(grads[0])]
    else:
        input_grads = [g.numpy()[0] for g in grads[:len(tensors)]]
    return outs, input_grads, [g.numpy() for g in grads[len(sources):]]


@pytest.mark.slow
@pytest.mark.parametrize("height_step", [1, 4])
def test_packed_equals_padded_equals_one_at_a_time(height_step):
    images, batch = ragged_batch()
    packed = make_layer(units=3, directions=4, packing="examples",
                        packing_height_step=height_step)
    padded = make_layer(units=3, directions=4, packing="pad")
    probes = [rand(image.shape[:2] + (12,), seed=10 + k) for k, image in enumerate(images)]
    results = [
        outputs_and_gradients(packed, batch, probes),
        outputs_and_gradients(padded, batch, probes),
        outputs_and_gradients(packed, images, probes),
    ]
    for outs, input_grads, weight_grads in results[1:]:
        for a, b in zip(results[0][0] + results[0][1], outs + input_grads):
            np.testing.assert_allclose(a, b, atol=1e-5)
        for a, b in zip(results[0][2], weight_grads):
            np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)
    for image, out in zip(images, results[0][0]):
        assert out.shape == image.shape[:2] + (12,)


def test_packed_examples_are_isolated():
    """Perturbing one example of a packed batch changes no other example's outputs."""
    images, batch = ragged_batch(count=12, seed=1)
    layer = make_layer(units=2, directions=4, packing="examples")
    base = layer(batch)
    for victim in (0, 5, 11):
        changed = [image.copy() for image in images]
        changed[victim] += 1.0
        out = layer(tf.ragged.stack([tf.constant(image) for image in changed]))
        for k in range(len(images)):
            same = np.array_equal(out[k].numpy(), base[k].numpy())
            assert same == (k != victim), f"example {k} after perturbing {victim}"


def test_gradients_flow_through_dense_conversion_of_packed_output():
    """``to_tensor()`` of the ragged output (a gather: its gradient is IndexedSlices) gives the
    same weight gradients as a loss on the flat values, which it only pads with zeros."""
    _, batch = ragged_batch()
    layer = make_layer(units=3, directions=2, packing="examples")
    gradients = []
    for densify in (lambda out: out.to_tensor(), lambda out: out.flat_values):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(densify(layer(batch)) ** 2)
        gradients.append(tape.gradient(loss, layer.trainable_weights))
    for a, b in zip(*gradients):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_ragged_inside_tf_function_and_errors():
    images, batch = ragged_batch(count=4, seed=2)
    layer = make_layer(units=2, directions=2)
    eager = layer(batch)
    graph = tf.function(lambda x: layer(x))(batch)
    np.testing.assert_allclose(graph.flat_values.numpy(), eager.flat_values.numpy(), atol=1e-6)
    with pytest.raises(ValueError):
        layer(batch, mask=np.ones((4, 2, 2), bool))
    with pytest.raises(ValueError):  # channel mismatch
        layer(tf.ragged.stack([tf.zeros((2, 3, 3)), tf.zeros((1, 2, 3))]))
    for packing in ("examples", "pad"):
        with pytest.raises(ValueError):  # zero-size example
            make_layer(packing=packing)(tf.ragged.stack([tf.zeros((2, 3, 2)), tf.zeros((0, 2, 2))]))


class _PooledRegressor(keras.Model):
    """Ragged images -> MDLSTM2D -> mean over each example's pixels -> Dense(1)."""

    def __init__(self):
        super().__init__(name="pooled_regressor")
        self.mdlstm = MDLSTM2D(4, directions=2)
        self.head = keras.layers.Dense(1)

    def call(self, images):
        hidden = self.mdlstm(images)
        example = tf.gather(hidden.value_rowids(), hidden.values.value_rowids())
        pooled = tf.math.segment_mean(hidden.flat_values, example)
        return self.head(pooled)


@pytest.mark.slow
def test_model_fit_on_ragged_batches():
    keras.utils.set_random_seed(0)
    images, batch = ragged_batch(count=16, seed=3)
    targets = np.array([[image[..., 0].mean() + 0.5] for image in images], np.float32)
    data = tf.data.Dataset.from_tensor_slices((batch, targets)).batch(8)
    model = _PooledRegressor()
    model.compile(keras.optimizers.Adam(0.02), "mse")
    history = model.fit(data, epochs=12, verbose=0, shuffle=False)
    losses = history.history["loss"]
    assert losses[-1] < 0.6 * losses[0]
