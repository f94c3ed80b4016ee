"""Tests for the Recognizer (:mod:`tfnhr.models`): the direction-shared dense layer against a
NumPy loop, parameter counts of the presets in closed form, output column counts, packing
invariance, CTC loss against a brute-force sum over alignments, saving/loading and config errors."""

from __future__ import annotations

import itertools
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.ragged import ragged_stack
from tests.helpers.tiny_models import CHARSET, TINY, tiny_recognizer
from tfnhr.config.choices import DEFAULT_MODEL_PRESET, MODEL_PRESETS
from tfnhr.cli import main as tfnhr_main
from tfnhr.models import PRESETS, Recognizer, build_recognizer
from tfnhr.models.ctc_model import column_entropy
from tfnhr.layers import DirectionSharedDense

SIZES = [(5, 1), (3, 7), (8, 9), (4, 17), (2, 33), (1, 16), (7, 4)]


def _images(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.random((h, w, 1), dtype=np.float32) for h, w in sizes]


@pytest.fixture(scope="module")
def tiny() -> Recognizer:
    return tiny_recognizer()


@pytest.fixture(scope="module")
def tiny_outputs(tiny):
    return tiny(ragged_stack(_images(SIZES)))


# ----------------------------------------------------------------- DirectionSharedDense

def naive_direction_shared(x: np.ndarray, kernel: np.ndarray, bias: np.ndarray, directions: int) -> np.ndarray:
    """``[..., D*u]`` -> ``[..., K]``: per position, sum over d of the d-th slice @ kernel, + bias."""
    units = x.shape[-1] // directions
    flat = x.reshape(-1, x.shape[-1]).astype(np.float64)
    out = np.zeros((flat.shape[0], kernel.shape[1]))
    for n in range(flat.shape[0]):
        for d in range(directions):
            out[n] += flat[n, d * units:(d + 1) * units] @ kernel
        out[n] += bias
    return out.reshape(x.shape[:-1] + (kernel.shape[1],))


def _shared_dense(units=5, directions=3, channels=21):
    layer = DirectionSharedDense(units, directions)
    layer.build((None, channels))
    layer.bias.assign(np.random.default_rng(2).normal(size=units).astype(np.float32))
    return layer


def test_direction_shared_dense_matches_numpy_dense():
    layer = _shared_dense()
    x = np.random.default_rng(0).normal(size=(2, 3, 4, 21)).astype(np.float32)
    out = layer(x)
    assert out.shape == (2, 3, 4, 5)
    assert layer.compute_output_shape((2, 3, 4, 21)) == (2, 3, 4, 5)
    assert layer.kernel.shape == (7, 5) and layer.bias.shape == (5,)
    expected = naive_direction_shared(x, layer.kernel.numpy(), layer.bias.numpy(), 3)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_direction_shared_dense_matches_numpy_ragged():
    layer = _shared_dense()
    rng = np.random.default_rng(1)
    images = [rng.normal(size=(h, w, 21)).astype(np.float32) for h, w in [(2, 3), (1, 1), (4, 2)]]
    out = layer(ragged_stack(images))
    assert isinstance(out, tf.RaggedTensor)
    kernel, bias = layer.kernel.numpy(), layer.bias.numpy()
    for image, result in zip(images, out):
        np.testing.assert_allclose(result.to_tensor().numpy(), naive_direction_shared(image, kernel, bias, 3),
                                   rtol=1e-5, atol=1e-5)


def test_direction_shared_dense_config_round_trip_and_errors():
    layer = _shared_dense()
    config = layer.get_config()
    assert config["units"] == 5 and config["directions"] == 3
    clone = DirectionSharedDense.from_config(config)
    assert (clone.units, clone.directions, clone.name) == (5, 3, layer.name)
    clone.build((None, 21))
    clone.set_weights(layer.get_weights())
    x = np.random.default_rng(3).normal(size=(4, 21)).astype(np.float32)
    np.testing.assert_array_equal(clone(x).numpy(), layer(x).numpy())
    with pytest.raises(ValueError, match="directions"):
        DirectionSharedDense(5, 4).build((None, 21))


# ----------------------------------------------------------------- parameters

def mdlstm_leaky_params(channels: int, units: int, directions: int = 4) -> int:
    """MDLSTM2D (leaky_lp: 5 gates, 2 peephole gates, 2 output gates) weights per its build()."""
    gates = 5 * units
    per_direction = (channels * gates          # kernel W
                     + 2 * units * gates       # recurrent U1, U2
                     + 2 * units * 2 * units   # peepholes V1, V2 of the 2 peephole gates
                     + units * 2 * units       # Vo of the 2 output gates
                     + gates)                  # bias
    return directions * per_direction


def recognizer_params(units, filters, block, classes, directions=4) -> int:
    (bh1, bw1), (bh2, bw2) = block
    u1, u2, u3 = units
    f1, f2 = filters
    return (mdlstm_leaky_params(1, u1, directions)
            + bh1 * bw1 * directions * u1 * f1 + f1
            + mdlstm_leaky_params(f1, u2, directions)
            + bh2 * bw2 * directions * u2 * f2 + f2
            + mdlstm_leaky_params(f2, u3, directions)
            + u3 * classes + classes)


@pytest.fixture(scope="module")
def small_2x2() -> Recognizer:
    """The "small" preset with per-level blocks (2, 2), (2, 2)."""
    return build_recognizer(CHARSET, preset="small", block=((2, 2), (2, 2)))


def test_small_preset_parameter_count_closed_form(small_2x2):
    units, filters = PRESETS["small"]["mdlstm_units"], PRESETS["small"]["conv_filters"]
    assert small_2x2.mdlstm_units == units and small_2x2.conv_filters == filters
    assert small_2x2.count_params() == recognizer_params(units, filters, ((2, 2), (2, 2)), CHARSET.num_classes)
    # By hand: MDLSTM 336 + 7800 + 181000, block convs 198 + 3220, scores 50 * 6 + 6.
    assert small_2x2.count_params() == 192_860


def test_large_preset_parameter_count_closed_form():
    model = build_recognizer(CHARSET, preset="large")
    units, filters = PRESETS["large"]["mdlstm_units"], PRESETS["large"]["conv_filters"]
    assert model.mdlstm_units == units and model.conv_filters == filters
    assert model.count_params() == recognizer_params(units, filters, ((2, 4), (2, 4)), CHARSET.num_classes)


def test_preset_values_are_the_seeds():
    assert PRESETS["small"] == {"mdlstm_units": (2, 10, 50), "conv_filters": (6, 20)}
    assert PRESETS["large"] == {"mdlstm_units": (4, 20, 100), "conv_filters": (12, 40)}


def test_small_wide_is_small_with_its_first_level_twice_as_wide():
    small, wide = PRESETS["small"], PRESETS["small-wide"]
    for key in ("mdlstm_units", "conv_filters"):
        assert wide[key] == (2 * small[key][0], *small[key][1:])
    model = build_recognizer(CHARSET, preset="small-wide", block=((2, 2), (2, 2)))
    assert model.count_params() == recognizer_params(wide["mdlstm_units"], wide["conv_filters"], ((2, 2), (2, 2)),
                                                     CHARSET.num_classes)


def test_small_stem_is_small_wide_with_convolutions_for_its_first_level():
    wide, stem = PRESETS["small-wide"], PRESETS["small-stem"]
    assert stem["mdlstm_units"] == wide["mdlstm_units"][1:] and stem["conv_filters"] == wide["conv_filters"]


def test_stem_80_is_small_stem_with_wider_levels():
    stem, wider = PRESETS["small-stem"], PRESETS["stem-80"]
    assert wider["stem_filters"] == stem["stem_filters"]
    assert all(w > s for key in ("mdlstm_units", "conv_filters") for w, s in zip(wider[key], stem[key]))


@pytest.mark.parametrize("preset", ["small-stem", "stem-80"])
def test_a_stem_preset_has_the_layers_and_parameters_of_its_sizes(preset):
    stem = PRESETS[preset]
    model = build_recognizer(CHARSET, preset=preset, block=((2, 2), (2, 2)))
    assert model.layer_names == ["stem1", "stem2", "block_conv1", "mdlstm1", "block_conv2", "mdlstm2",
                                 "scores", "output"]
    (s1, s2), (u2, u3), (f1, f2), classes = stem["stem_filters"], stem["mdlstm_units"], stem["conv_filters"], \
        CHARSET.num_classes
    assert model.count_params() == (3 * 3 * 1 * s1 + s1 + 3 * 3 * s1 * s2 + s2     # the stem's 3x3 convolutions
                                    + 2 * 2 * s2 * f1 + f1                          # block conv 1 reads the stem
                                    + mdlstm_leaky_params(f1, u2) + 2 * 2 * 4 * u2 * f2 + f2
                                    + mdlstm_leaky_params(f2, u3) + u3 * classes + classes)
    out = model(ragged_stack(_images(SIZES, seed=5)))
    assert out.row_lengths().numpy().tolist() == [expected_columns(w, [(2, 2)] * 2) for _, w in SIZES]


def test_sizes_of_a_stemless_shape_drop_a_presets_stem():
    model = build_recognizer(CHARSET, preset="small-stem", **TINY)
    assert (model.stem_filters, model.mdlstm_units) == ((), TINY["mdlstm_units"])
    assert model.layer_names[0] == "mdlstm1"
    kept = build_recognizer(CHARSET, preset="small-stem", mdlstm_units=(4, 6))
    assert (kept.stem_filters, kept.mdlstm_units, kept.conv_filters) == ((8, 16), (4, 6), (12, 20))
    with pytest.raises(ValueError, match="as many MDLSTM levels as"):
        build_recognizer(CHARSET, preset="small-stem", mdlstm_units=(4, 6, 8), stem_filters=(4,))


def test_a_stem_reads_each_example_as_if_alone():
    """Packed batches must not leak between examples through the stem's 3x3 windows: a batch
    of images of different sizes gives each image's output alone, and so do the same images
    laid out by padding instead of packing."""
    model = Recognizer(CHARSET, mdlstm_units=(3, 5), conv_filters=(4, 6), stem_filters=(3,), block=(2, 2))
    images = _images(SIZES, seed=11)
    batched = model(ragged_stack(images))
    for image, row in zip(images, batched):
        np.testing.assert_allclose(row.numpy(), model(ragged_stack([image]))[0].numpy(), rtol=1e-5, atol=1e-5)
    # Zero ink around an image is what "same" padding adds: the stem must give the image's rows
    # and columns alone, not the values a larger canvas of zeros would give at its border.
    padded = np.zeros((12, 40, 1), np.float32)
    padded[:SIZES[3][0], :SIZES[3][1]] = images[3]
    stem_alone = model.stems[0](ragged_stack([images[3]]))[0].numpy()
    stem_in_canvas = model.stems[0](ragged_stack([padded]))[0].numpy()[:SIZES[3][0], :SIZES[3][1]]
    np.testing.assert_allclose(stem_alone, stem_in_canvas, rtol=1e-6, atol=1e-6)


def test_the_offered_presets_are_the_built_ones_and_the_help_gives_their_sizes(capsys):
    assert set(MODEL_PRESETS) == set(PRESETS) and DEFAULT_MODEL_PRESET in PRESETS
    with pytest.raises(SystemExit):
        tfnhr_main(["train", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for name in MODEL_PRESETS:
        model = build_recognizer(CHARSET, preset=name)
        stem = f"stem {model.stem_filters}, " if model.stem_filters else ""
        assert f"{name} = {stem}{model.mdlstm_units} / {model.conv_filters}" in help_text


def test_tiny_variable_shapes_follow_config(tiny):
    shapes = {w.path.split("/", 1)[1]: tuple(w.shape) for w in tiny.trainable_weights}
    c_in = {1: 1, 2: 3, 3: 5}
    for level, u in enumerate((2, 4, 6), start=1):
        assert shapes[f"mdlstm{level}/kernel"] == (4, c_in[level], 5 * u)
        assert shapes[f"mdlstm{level}/recurrent_kernel"] == (4, 2 * u, 5 * u)
        assert shapes[f"mdlstm{level}/peephole_kernel"] == (4, 2 * u, 2 * u)
        assert shapes[f"mdlstm{level}/output_peephole_kernel"] == (4, u, 2 * u)
        assert shapes[f"mdlstm{level}/bias"] == (4, 5 * u)
    assert shapes["block_conv1/kernel"] == (2, 4, 4 * 2, 3) and shapes["block_conv1/bias"] == (3,)
    assert shapes["block_conv2/kernel"] == (2, 4, 4 * 4, 5) and shapes["block_conv2/bias"] == (5,)
    assert shapes["scores/kernel"] == (6, CHARSET.num_classes) and shapes["scores/bias"] == (6,)
    assert len(shapes) == 3 * 5 + 2 * 2 + 2
    assert tiny.count_params() == recognizer_params((2, 4, 6), (3, 5), ((2, 4), (2, 4)), CHARSET.num_classes)


# ----------------------------------------------------------------- outputs

def expected_columns(width, blocks):
    columns = width
    for _, bw in blocks:
        columns = math.ceil(columns / bw)
    return columns


def test_output_columns_block_2x4(tiny, tiny_outputs):
    assert tiny.width_reduction == 16
    assert isinstance(tiny_outputs, tf.RaggedTensor)
    assert tiny_outputs.shape.as_list() == [len(SIZES), None, CHARSET.num_classes]
    assert tiny_outputs.row_lengths().numpy().tolist() == [expected_columns(w, [(2, 4)] * 2) for _, w in SIZES]
    assert [expected_columns(w, [(2, 4)] * 2) for _, w in SIZES] == [1, 1, 1, 2, 3, 1, 1]
    assert np.all(np.isfinite(tiny_outputs.flat_values.numpy()))


def test_output_columns_per_level_blocks(small_2x2):
    model = small_2x2
    assert model.blocks == ((2, 2), (2, 2)) and model.width_reduction == 4
    assert model.convs[0].kernel.shape[:2] == (2, 2) and model.convs[1].kernel.shape[:2] == (2, 2)
    out = model(ragged_stack(_images(SIZES, seed=5)))
    assert out.row_lengths().numpy().tolist() == [expected_columns(w, [(2, 2)] * 2) for _, w in SIZES]
    assert [expected_columns(w, [(2, 2)] * 2) for _, w in SIZES] == [1, 2, 3, 5, 9, 4, 1]
    assert out.shape[-1] == CHARSET.num_classes


def test_batch_equals_each_example_alone(tiny, tiny_outputs):
    for image, batched in zip(_images(SIZES), tiny_outputs):
        alone = tiny(ragged_stack([image]))[0]
        np.testing.assert_allclose(batched.numpy(), alone.numpy(), rtol=1e-5, atol=1e-5)


def test_pad_packing_equals_example_packing(tiny, tiny_outputs):
    assert [layer.packing for layer in Recognizer(CHARSET, **TINY, packing="pad").mdlstms] == ["pad"] * 3
    assert [layer.packing for layer in tiny.mdlstms] == ["examples"] * 3
    # The same weights laid out by padding instead of packing (switched on the built layers, to
    # save building a second model).
    try:
        for layer in tiny.mdlstms:
            layer.packing = "pad"
        out = tiny(ragged_stack(_images(SIZES)))
    finally:
        for layer in tiny.mdlstms:
            layer.packing = "examples"
    np.testing.assert_array_equal(out.row_lengths().numpy(), tiny_outputs.row_lengths().numpy())
    np.testing.assert_allclose(out.flat_values.numpy(), tiny_outputs.flat_values.numpy(), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------- CTC loss

def brute_force_ctc_loss(scores: np.ndarray, label: list[int]) -> float:
    """-ln of the summed probability of every length-T path that collapses to ``label``."""
    scores = scores.astype(np.float64)
    probs = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    total = 0.0
    for path in itertools.product(range(scores.shape[1]), repeat=scores.shape[0]):
        collapsed = [c for i, c in enumerate(path) if c != 0 and (i == 0 or c != path[i - 1])]
        if collapsed == label:
            total += np.prod(probs[np.arange(len(path)), path])
    return -math.log(total)


def test_ctc_loss_matches_brute_force(tiny):
    rng = np.random.default_rng(4)
    labels = [[1, 2], [3, 3], [4], [2, 1, 2]]
    lengths = [4, 3, 2, 5]
    scores = [rng.normal(size=(t, CHARSET.num_classes)).astype(np.float32) for t in lengths]
    loss = tiny.ctc_loss(tf.ragged.constant(labels, dtype=tf.int32), tf.ragged.constant(scores, ragged_rank=1))
    expected = np.mean([brute_force_ctc_loss(s, label) for s, label in zip(scores, labels)])
    assert float(loss) == pytest.approx(expected, rel=1e-4)


def test_ctc_loss_gradient_matches_the_dense_label_implementation(tiny):
    """The sparse-label C++ kernel against Keras' dense-label CTC (TensorFlow ops), loss and gradient."""
    rng = np.random.default_rng(5)
    labels = tf.ragged.constant([[1, 2, 2], [3], [4, 1, 4, 1]], dtype=tf.int32)
    scores = tf.ragged.constant([rng.normal(size=(t, CHARSET.num_classes)).astype(np.float32) for t in (7, 3, 9)],
                                ragged_rank=1)

    def loss_and_gradient(loss_fn):
        with tf.GradientTape() as tape:
            values = scores.flat_values + 0.0
            tape.watch(values)
            loss = loss_fn(scores.with_flat_values(values))
        return float(loss), tf.convert_to_tensor(tape.gradient(loss, values)).numpy()

    loss, gradient = loss_and_gradient(lambda s: tiny.ctc_loss(labels, s))
    expected_loss, expected_gradient = loss_and_gradient(lambda s: tf.reduce_mean(keras.ops.ctc_loss(
        labels.to_tensor(), s.to_tensor(), labels.row_lengths(), s.row_lengths(), mask_index=0)))
    assert loss == pytest.approx(expected_loss, rel=1e-5)
    np.testing.assert_allclose(gradient, expected_gradient, atol=1e-5)


def test_ctc_loss_of_an_infeasible_example_is_an_error_or_infinite(tiny):
    scores = tf.ragged.constant([np.zeros((2, CHARSET.num_classes), np.float32)], ragged_rank=1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="Not enough time"):
        tiny.ctc_loss(tf.ragged.constant([[1, 2, 3]], dtype=tf.int32), scores)
    repeated = tiny.ctc_loss(tf.ragged.constant([[1, 1]], dtype=tf.int32), scores)  # needs a blank between
    assert np.isinf(float(repeated))


# ----------------------------------------------------------------- confidence penalty

def test_column_entropy_matches_numpy_per_example():
    rng = np.random.default_rng(6)
    scores = [rng.normal(scale=3.0, size=(t, CHARSET.num_classes)).astype(np.float32) for t in (4, 0, 1, 6)]
    entropies = column_entropy(tf.ragged.constant(scores, ragged_rank=1, inner_shape=(CHARSET.num_classes,)))
    expected = []
    for example in scores:
        total = 0.0
        for column in example.astype(np.float64):
            p = np.exp(column - column.max())
            p /= p.sum()
            total -= float(np.sum(p * np.log(p)))
        expected.append(total)
    np.testing.assert_allclose(entropies.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert expected[1] == 0.0 and entropies.dtype == tf.float32
    exact = column_entropy(tf.ragged.constant([example.astype(np.float64) for example in scores], ragged_rank=1,
                                              inner_shape=(CHARSET.num_classes,)))
    assert exact.dtype == tf.float64  # as the CTC loss of float64 scores, so the two subtract
    np.testing.assert_allclose(exact.numpy(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.slow
def test_training_step_subtracts_the_weighted_column_entropy_from_the_ctc_loss():
    """One ``train_step`` of plain SGD with the penalty moves every weight by minus the rate
    times the gradient of mean CTC loss - weight x mean summed entropy, computed here apart; and
    the penalty does move the weights (the same step without it differs)."""
    images = ragged_stack(_images([(16, 80), (16, 48), (16, 112)], seed=9))  # 5, 3 and 7 columns
    labels = tf.ragged.constant([[1, 2], [3], [2, 4, 1]], dtype=tf.int32)

    def model_with(penalty: float) -> Recognizer:
        model = tiny_recognizer()
        clone = build_recognizer(CHARSET, **TINY, dropout=0.0, input_height=16)  # deterministic steps
        clone.set_weights(model.get_weights())
        clone.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), jit_compile=False)
        clone.confidence_penalty = penalty
        return clone

    reference = model_with(0.3)
    with tf.GradientTape() as tape:
        scores = reference(images, training=True)
        objective = reference.ctc_loss(labels, scores) - 0.3 * tf.reduce_mean(column_entropy(scores))
    gradients = tape.gradient(objective, reference.trainable_variables)
    expected = [(w - 0.1 * g).numpy() for w, g in zip(reference.trainable_variables, gradients)]

    penalised, plain = model_with(0.3), model_with(0.0)
    for model in (penalised, plain):
        model.train_step((images, labels))
    for got, want in zip(penalised.trainable_variables, expected):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-6)
    assert max(float(np.abs(a.numpy() - b.numpy()).max())
               for a, b in zip(penalised.trainable_variables, plain.trainable_variables)) > 1e-5


# ----------------------------------------------------------------- saving and config

def test_save_and_load_give_identical_predictions(tiny, tmp_path):
    path = tmp_path / "tiny.keras"
    tiny.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, Recognizer)
    assert loaded.charset == CHARSET and loaded.charset.with_unknown
    assert loaded.input_height == 16
    assert (loaded.mdlstm_units, loaded.conv_filters, loaded.blocks) == ((2, 4, 6), (3, 5), ((2, 4), (2, 4)))
    for a, b in zip(loaded.get_weights(), tiny.get_weights()):
        np.testing.assert_array_equal(a, b)
    # One 16 x 16 image, the shape the loaded model was built (traced) with: no second trace.
    image = ragged_stack(_images([(16, 16)], seed=9))
    np.testing.assert_array_equal(loaded(image).flat_values.numpy(), tiny(image).flat_values.numpy())


def test_config_round_trip_without_building(tiny):
    config = tiny.get_config()
    assert config["charset"] == CHARSET.to_config() and config["input_height"] == 16
    clone = Recognizer.from_config(config)
    assert clone.charset == CHARSET
    assert (clone.blocks, clone.dropout, clone.cell, clone.packing, clone.directions) == (
        ((2, 4), (2, 4)), 0.25, "leaky_lp", "examples", 4)
    stem = Recognizer(CHARSET, mdlstm_units=(4, 6), conv_filters=(3, 5), stem_filters=(2, 3))
    assert Recognizer.from_config(stem.get_config()).stem_filters == (2, 3)
    older = {key: value for key, value in config.items() if key != "stem_filters"}  # saved before stems
    assert Recognizer.from_config(older).stem_filters == ()


@pytest.mark.parametrize("kwargs, match", [
    ({"block": (2,)}, "block"),
    ({"block": (0, 4)}, "block"),
    ({"block": ((2, 2),)}, "block"),
    ({"block": ((2, 2), (2, 2), (2, 2))}, "block"),
    ({"block": ((2, 2), (2, -1))}, "block"),
    ({"mdlstm_units": (2, 4), "conv_filters": (3, 5)}, "MDLSTM level"),
    ({"mdlstm_units": (2, 4, 6, 8), "conv_filters": (3, 5)}, "MDLSTM level"),
    ({"mdlstm_units": (2,), "conv_filters": ()}, "MDLSTM level"),
    ({"mdlstm_units": (2, 4, 6), "conv_filters": (3, 5), "stem_filters": (4,)}, "as many MDLSTM levels as"),
    ({"input_height": 0}, "input_height"),
    ({"input_height": -5}, "input_height"),
])
def test_config_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Recognizer(CHARSET, **{**TINY, **kwargs})


def test_bad_preset_raises():
    with pytest.raises(ValueError, match="preset"):
        build_recognizer(CHARSET, preset="medium")


def test_block_forms():
    assert Recognizer(CHARSET, **TINY, block=(3, 2)).blocks == ((3, 2), (3, 2))
    assert Recognizer(CHARSET, **TINY, block=[[1, 2], [3, 4]]).blocks == ((1, 2), (3, 4))
    assert Recognizer(CHARSET, **TINY, block=((1, 2), (3, 4))).width_reduction == 8
