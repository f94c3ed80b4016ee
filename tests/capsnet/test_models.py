"""CapsNet and MLCN models: structure, training through model.fit, placement on devices, saving."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from capsnet.data import synthetic_shapes
from capsnet.lanes import Lane
from capsnet.models import LaneBlock, build_capsnet, build_mlcn, load_model
from tests.helpers.capsule_reference import squash_reference

SIZE = 20  # 20 -> conv 9×9 -> 12 -> primary 9×9 stride 2 -> 2×2 capsule maps


@pytest.fixture(scope="module")
def shapes():
    return synthetic_shapes(n_train=384, n_test=96, size=SIZE, n_class=4, seed=0)


def dense_params(n_in: int, n_out: int) -> int:
    return n_in * n_out + n_out


def conv_params(kernel: int, c_in: int, c_out: int) -> int:
    return kernel * kernel * c_in * c_out + c_out


def decoder_params(capsule_values: int, pixels: int) -> int:
    return dense_params(capsule_values, 512) + dense_params(512, 1024) + dense_params(1024, pixels)


def test_capsnet_has_sabours_parameter_count():
    model = build_capsnet((28, 28, 1), 10)
    expected = (conv_params(9, 1, 256) + conv_params(9, 256, 256) + 1152 * 8 * 10 * 16
                + decoder_params(10 * 16, 784))
    assert model.count_params() == expected  # 8 215 568: the "8.2 M" of the reference code
    assert model(np.zeros((3, 28, 28, 1), np.float32)).shape == (3, 10)


def test_mlcn_parameter_count_per_lane():
    lanes = [Lane(4, 1), Lane(2, 3)]
    model = build_mlcn((28, 28, 1), 10, lanes)

    def lane_params(lane: Lane) -> int:
        filters, maps = 16 * lane.width, 2 * lane.width
        convs = conv_params(9, 1, filters) + (lane.depth - 1) * conv_params(3, filters, filters)
        return convs + conv_params(9, filters, maps * 8) + 6 * 6 * maps * 8 * 10 * 1

    assert model.count_params() == sum(map(lane_params, lanes)) + decoder_params(10 * len(lanes), 784)


def test_class_capsules_are_the_lanes_outputs_squashed_across_lanes(shapes):
    model = build_mlcn((SIZE, SIZE, 1), 4, ["1x1", "2x2", "1x3"])
    images = shapes.x_test[:5]
    per_lane = np.stack([block(images).numpy() for block in model.lane_blocks], axis=-1)  # [B, K, L]
    np.testing.assert_allclose(model.class_capsules(images).numpy(), squash_reference(per_lane.astype(np.float64)),
                               rtol=1e-4, atol=1e-6)
    assert model(images).shape == (5, 4)
    assert np.all(model(images).numpy() < 1.0)


def test_lane_dropout_drops_whole_lanes(shapes):
    model = build_mlcn((SIZE, SIZE, 1), 4, ["1x1"] * 6, lane_dropout=0.5)
    capsules = model.class_capsules(shapes.x_test[:16], training=True).numpy()  # [B, K, L]
    dropped = np.all(capsules == 0, axis=1)  # [B, L]: a lane is zero for every class or for none
    partly = np.any(capsules == 0, axis=1) & ~dropped
    assert dropped.any() and not partly.any()
    inference = model.class_capsules(shapes.x_test[:16], training=False).numpy()
    assert not np.any(np.all(inference == 0, axis=1))


def test_outputs_do_not_depend_on_the_batch(shapes):
    model = build_mlcn((SIZE, SIZE, 1), 4, ["1x1", "1x2"])
    images = shapes.x_test[:4]
    alone = np.concatenate([model.predict(images[i:i + 1], verbose=0) for i in range(4)])
    np.testing.assert_allclose(model.predict(images, batch_size=4, verbose=0), alone, rtol=1e-5, atol=1e-6)


def fit_and_score(model, data, epochs: int):
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    before = model.evaluate(data.x_test, data.y_test, batch_size=32, verbose=0, return_dict=True)
    history = model.fit(data.x_train, data.y_train, batch_size=16, epochs=epochs, verbose=0, shuffle=True)
    after = model.evaluate(data.x_test, data.y_test, batch_size=32, verbose=0, return_dict=True)
    return before, history.history, after


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["capsnet", "mlcn"])
def test_fit_lowers_the_loss_and_learns_the_shapes(shapes, kind):
    keras.utils.set_random_seed(0)
    if kind == "capsnet":
        model = build_capsnet((SIZE, SIZE, 1), 4, conv_filters=32, primary_channels=8)
    else:  # heterogeneous lanes, each on its own logical CPU
        model = build_mlcn((SIZE, SIZE, 1), 4, ["2x1", "1x2", "1x1"], placement=["cpu:1", "cpu:2", "cpu:3"],
                           main_device="cpu:0")
    before, history, after = fit_and_score(model, shapes, epochs=8)
    assert history["loss"][-1] < 0.6 * history["loss"][0]
    assert after["loss"] < 0.6 * before["loss"]
    assert after["accuracy"] >= 0.7  # 4 balanced classes: chance is 0.25
    predicted = np.argmax(model.predict(shapes.x_test, verbose=0), axis=-1)
    assert np.mean(predicted == shapes.y_test) == pytest.approx(after["accuracy"], abs=1e-6)


def step_graph(model) -> tf.Graph:
    model.compile(optimizer="adam")
    model.optimizer.build(model.trainable_variables)
    step = tf.function(model.train_step)
    signature = (tf.TensorSpec([None, SIZE, SIZE, 1]), tf.TensorSpec([None], tf.int32))
    return step.get_concrete_function(signature).graph


def test_lane_ops_forward_and_backward_land_on_their_devices():
    placement = {0: "/device:CPU:1", 1: "/device:CPU:3", 2: "/device:CPU:1"}
    model = build_mlcn((SIZE, SIZE, 1), 4, ["1x1", "1x2", "2x1"], placement=placement, main_device="cpu:2")
    for index, block in enumerate(model.lane_blocks):
        assert block.weights and all(v.value.device.endswith(placement[index]) for v in block.weights)
    assert all(v.value.device.endswith("/device:CPU:2") for v in model.decoder.weights)
    heavy = {"Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput", "BatchMatMulV2"}
    seen = {index: set() for index in placement}
    for op in step_graph(model).get_operations():
        parts = op.name.split("/")
        lane = next((int(p[4:].split("_")[0]) for p in parts if p.startswith("lane")), None)
        if lane is not None and op.type in heavy:
            assert op.device == placement[lane], (op.name, op.device)
            seen[lane].add((op.type, parts[0] == "gradients"))
        if op.type == "MatMul" and any(p.startswith("decoder") for p in parts):
            assert op.device == "/device:CPU:2", (op.name, op.device)
    for ops in seen.values():  # forward and backward convolutions and routing matmuls of every lane
        assert {("Conv2D", False), ("Conv2DBackpropFilter", True), ("BatchMatMulV2", True)} <= ops


@pytest.mark.slow
def test_save_and_load_keep_weights_config_and_placement(tmp_path, shapes):
    model = build_mlcn((SIZE, SIZE, 1), 4, ["1x1", "2x2"], placement=["cpu:1", "cpu:0"], lane_dropout=0.25,
                       routings=2)
    model.compile(optimizer="adam")
    model.fit(shapes.x_train[:32], shapes.y_train[:32], batch_size=16, epochs=1, verbose=0)
    path = tmp_path / "mlcn.keras"
    model.save(path)
    loaded = load_model(path)
    assert loaded.placement == {0: "/device:CPU:1", 1: "/device:CPU:0"}
    assert (loaded.lanes, loaded.lane_dropout, loaded.routings) == (model.lanes, 0.25, 2)
    np.testing.assert_allclose(loaded.predict(shapes.x_test[:8], verbose=0),
                               model.predict(shapes.x_test[:8], verbose=0), rtol=1e-6)
    moved = load_model(path, placement={0: "cpu:3", 1: "cpu:3"})
    assert moved.placement == {0: "/device:CPU:3", 1: "/device:CPU:3"}
    assert all(v.value.device.endswith("CPU:3") for block in moved.lane_blocks for v in block.weights)
    np.testing.assert_allclose(moved.predict(shapes.x_test[:8], verbose=0),
                               model.predict(shapes.x_test[:8], verbose=0), rtol=1e-6)


def test_capsnet_save_and_load(tmp_path, shapes):
    model = build_capsnet((SIZE, SIZE, 1), 4, conv_filters=16, primary_channels=4, class_dim=8)
    model.save(tmp_path / "capsnet.keras")
    loaded = keras.saving.load_model(tmp_path / "capsnet.keras")
    assert (loaded.conv_filters, loaded.primary_channels, loaded.class_dim) == (16, 4, 8)
    np.testing.assert_allclose(loaded.predict(shapes.x_test[:4], verbose=0),
                               model.predict(shapes.x_test[:4], verbose=0), rtol=1e-6)
    np.testing.assert_allclose(loaded.reconstruct(shapes.x_test[:4]).numpy(),
                               model.reconstruct(shapes.x_test[:4]).numpy(), rtol=1e-6)


@pytest.mark.parametrize("kwargs, message", [
    ({"lanes": []}, "at least one lane"),
    ({"lanes": [(0, 1)]}, "width must be a positive int"),
    ({"lanes": ["1x0"]}, "depth must be a positive int"),
    ({"lanes": ["1x1"], "lane_dropout": 1.0}, "lane_dropout"),
    ({"lanes": ["1x1", "1x1"], "placement": ["cpu:0"]}, "1 devices for 2 lanes"),
    ({"lanes": ["1x1", "1x1"], "placement": {0: "cpu:0", 2: "cpu:1"}}, "each lane 0..1"),
    ({"lanes": ["1x1"], "placement": ["cpu:9"]}, "CPU:9"),
    ({"lanes": ["1x1"], "placement": ["tpu-zero"]}, "tpu-zero"),
    ({"lanes": ["1x1"], "main_device": "gpu:0"}, "GPU:0"),
])
def test_bad_model_input_raises_clearly(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_mlcn((SIZE, SIZE, 1), 4, **kwargs)


def test_lane_block_output_and_config():
    block = LaneBlock("2x3", 5, routings=2, name="lane")
    out = block(tf.zeros((2, 28, 28, 1)))
    assert out.shape == (2, 5) == block.compute_output_shape((2, 28, 28, 1))
    assert [c.kernel.shape[:2] for c in block.convs] == [(9, 9), (3, 3), (3, 3)]
    clone = LaneBlock.from_config(block.get_config())
    assert (clone.lane, clone.n_class, clone.routings) == (Lane(2, 3), 5, 2)
    assert math.prod(block.primary.conv.kernel.shape) == 9 * 9 * 32 * 32
