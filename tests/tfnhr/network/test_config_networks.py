"""Networks from config files (tfnhr.network): the checks and their messages, the layers the
config language adds (against NumPy/TensorFlow references), the shipped presets against the
hand-built Recognizer, and `tfnhr train --config` end to end."""

from __future__ import annotations

import csv
import json
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
import yaml

from tests.helpers.ragged import ragged_stack
from tfnhr.charset import Charset
from tfnhr.cli import main
from tfnhr.layers import SameConv2D, SequenceLSTM
from tfnhr.models import build_recognizer, load_recognizer
from tfnhr.models import ConfigNetwork, build_config_network, copy_recognizer_weights
from tfnhr.network import NetworkConfigError, load_config, plan_network
from tfnhr.config.choices import shipped_configs

CHARSET = Charset.from_texts(["abc de"])


def tiny_network(units=(2, 3, 4), filters=(3, 5), block=(2, 4), dropout=0.0) -> dict:
    """The preset layout (MDLSTM, block conv, MDLSTM, block conv, MDLSTM, ctc) at a tiny size."""
    network, source = {}, "data"
    for level, n_out in enumerate(units, start=1):
        network[f"mdlstm{level}"] = {"class": "mdlstm2d", "from": [source], "n_out": n_out, "dropout": dropout}
        source = f"mdlstm{level}"
        if level <= len(filters):
            network[f"block_conv{level}"] = {"class": "block_conv", "from": [source], "n_out": filters[level - 1],
                                              "block": list(block)}
            source = f"block_conv{level}"
    network["output"] = {"class": "ctc", "from": [source], "directions": 4}
    return network


def images(*sizes, seed=0, channels=1) -> tf.RaggedTensor:
    rng = np.random.default_rng(seed)
    return ragged_stack([rng.random((h, w, channels), dtype=np.float32) for h, w in sizes])


# ---- checks and their messages --------------------------------------------------------------

SEQUENCE_NET = {"collapse": {"class": "collapse"}, "output": {"class": "ctc", "from": "collapse"}}


@pytest.mark.parametrize("network, expected", [
    ({**SEQUENCE_NET, "collapse": {"class": "colapse"}}, ["'collapse'", "unknown class 'colapse'", "did you mean 'collapse'"]),
    ({**SEQUENCE_NET, "output": {"class": "ctc", "from": ["colapse"]}}, ["'output'", "unknown layer 'colapse'"]),
    ({**SEQUENCE_NET, "output": {"class": "ctc", "from": []}}, ["'output'", "'from' is empty"]),
    ({"a": {"class": "linear", "from": "b", "n_out": 3}, "b": {"class": "linear", "from": "a", "n_out": 3},
      "output": {"class": "ctc", "from": "a"}}, ["cycle", "a -> b -> a"]),
    ({"m": {"class": "mdlstm2d", "n_out": "8"}, "output": {"class": "ctc", "from": "m"}},
     ["'m'", "'n_out' must be a positive integer", "'8' (str)"]),
    ({"m": {"class": "mdlstm2d", "n_out": True}, "output": {"class": "ctc", "from": "m"}}, ["'m'", "'n_out'"]),
    ({"m": {"class": "mdlstm2d", "n_out": 2, "directions": 3}, "output": {"class": "ctc", "from": "m"}},
     ["'m'", "'directions' must be one of 1, 2, 4"]),
    ({"m": {"class": "mdlstm2d", "units": 2}, "output": {"class": "ctc", "from": "m"}},
     ["'m'", "no parameter 'units'"]),
    ({"m": {"class": "mdlstm2d"}, "output": {"class": "ctc", "from": "m"}}, ["'m'", "needs parameter 'n_out'"]),
    ({"m": {"class": "block_conv", "n_out": 2, "block": [2]}, "output": {"class": "ctc", "from": "m"}},
     ["'m'", "'block' must be [height, width]"]),
    ({"m": {"class": "linear", "n_out": 2, "activation": "tanhh"}, "output": {"class": "ctc", "from": "m"}},
     ["'m'", "'activation'"]),
    ({**SEQUENCE_NET, "m": {"class": "mdlstm2d", "from": "collapse", "n_out": 2},
      "output": {"class": "ctc", "from": "m"}}, ["'m'", "reads image input", "'collapse' give sequence output"]),
    ({"c": {"class": "block_conv", "n_out": 2}, "output": {"class": "ctc", "from": ["c", "data"]}},
     ["'output'", "cannot be concatenated"]),
    ({"m": {"class": "collapse"}}, ["exactly one 'ctc' layer", "none"]),
    ({**SEQUENCE_NET, "o2": {"class": "ctc", "from": "collapse"}}, ["exactly one 'ctc' layer", "'output', 'o2'"]),
    ({"data": {"class": "collapse"}, "output": {"class": "ctc"}}, ["'data' is reserved"]),
    ({"x": {"from": "data"}, "output": {"class": "ctc"}}, ["'x'", "no 'class'"]),
])
def test_bad_networks_are_refused_naming_layer_and_problem(network, expected):
    with pytest.raises(NetworkConfigError) as error:
        plan_network(network)
    for text in expected:
        assert text in str(error.value), (text, str(error.value))


def test_build_starts_at_the_loss_and_skips_layers_that_feed_nothing():
    network = {**tiny_network(), "unused": {"class": "mdlstm2d", "n_out": 7},
               "unused_too": {"class": "linear", "from": "unused", "n_out": 2}}
    plan = plan_network(network)
    names = [spec.name for spec in plan.layers]
    assert names == ["mdlstm1", "block_conv1", "mdlstm2", "block_conv2", "mdlstm3", "output"]
    assert plan.unused == ("unused", "unused_too") and plan.reduction == (4, 16)
    with pytest.warns(UserWarning, match="unused"):
        model = build_config_network(network, CHARSET)
    assert model.layer_names == names and "unused" not in [layer.name for layer in model.graph_layers]


def test_a_layer_without_from_reads_the_image_and_several_are_concatenated():
    network = {"fw": {"class": "rec", "n_out": 3}, "bw": {"class": "rec", "n_out": 2, "direction": -1},
               "both": {"class": "collapse", "from": ["fw", "bw"]}, "output": {"class": "ctc", "from": "both"}}
    model = build_config_network(network, CHARSET)
    batch = images((3, 7), (2, 4))
    outputs = model.layer_outputs(batch, ["fw", "bw", "both"])
    expected = tf.reduce_sum(tf.concat([outputs["fw"].to_tensor(), outputs["bw"].to_tensor()], -1), axis=1)
    np.testing.assert_allclose(outputs["both"].to_tensor().numpy(), expected.numpy(), atol=1e-6)


def test_sequences_concatenate_when_their_widths_agree_whatever_their_heights():
    network = {"tall": {"class": "block_conv", "n_out": 2, "block": [4, 2]},
               "flat": {"class": "block_conv", "n_out": 3, "block": [1, 2]},
               "a": {"class": "collapse", "from": "tall"}, "b": {"class": "collapse", "from": "flat"},
               "output": {"class": "ctc", "from": ["a", "b"]}}
    assert plan_network(network).reduction[1] == 2
    wider = {**network, "flat": {"class": "block_conv", "n_out": 3, "block": [1, 4]}}
    with pytest.raises(NetworkConfigError, match="'output': its 'from' layers cannot be concatenated"):
        plan_network(wider)


def test_channel_errors_found_when_building_name_the_layer():
    network = {"m": {"class": "mdlstm2d", "n_out": 3, "directions": 1},
               "output": {"class": "ctc", "from": "m", "directions": 2}}
    with pytest.raises(NetworkConfigError, match=r"layer 'output' \(ctc\): 3 input channels"):
        build_config_network(network, CHARSET)


# ---- the layers against independent references ----------------------------------------------

def numpy_lstm(x: np.ndarray, kernel, recurrent, bias) -> np.ndarray:
    """Keras' LSTM (gates i, f, c, o; sigmoid and tanh) on one sequence ``[T, C]``, step by step."""
    units = recurrent.shape[0]
    h, c, out = np.zeros(units), np.zeros(units), []
    sigmoid = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    for step in x:
        z = step @ kernel + h @ recurrent + bias
        i, f, g, o = (z[k * units:(k + 1) * units] for k in range(4))
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        out.append(h)
    return np.array(out)


@pytest.mark.parametrize("direction", [1, -1])
def test_rec_is_an_lstm_along_each_sequence_and_each_image_row(direction):
    rng = np.random.default_rng(direction + 5)
    sequences = [rng.normal(size=(t, 3)).astype(np.float32) for t in (6, 2, 4)]
    layer = SequenceLSTM(5, direction=direction)
    got = layer(tf.RaggedTensor.from_row_lengths(np.concatenate(sequences), [len(s) for s in sequences]))
    weights = [w.numpy() for w in layer.lstm.weights]
    for sequence, output in zip(sequences, got):
        ordered = sequence if direction == 1 else sequence[::-1]
        expected = numpy_lstm(ordered, *weights)
        np.testing.assert_allclose(output.numpy(), expected if direction == 1 else expected[::-1], atol=1e-5)
    batch = images((2, 5), (3, 3), channels=3)
    rows = layer(batch)
    for image, output in zip(batch, rows):
        for row, row_output in zip(image.to_tensor().numpy(), output.to_tensor().numpy()):
            expected = numpy_lstm(row if direction == 1 else row[::-1], *weights)
            np.testing.assert_allclose(row_output, expected if direction == 1 else expected[::-1], atol=1e-5)


def test_conv_pads_every_example_as_if_it_were_alone():
    layer = SameConv2D(4, kernel=(3, 5))
    batch = images((4, 9), (6, 3))
    got = layer(batch)
    kernel, bias = (w.numpy() for w in layer.conv.weights)
    for image, output in zip(batch, got):
        alone = tf.nn.conv2d(image.to_tensor()[None], kernel, strides=1, padding="SAME")[0] + bias
        np.testing.assert_allclose(output.to_tensor().numpy(), np.tanh(alone.numpy()), atol=1e-5)


# ---- shipped configs: the presets ------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("preset", ["small", "large"])
def test_shipped_preset_configs_describe_the_preset_recognizer(preset):
    config = load_config(preset)
    assert preset in shipped_configs()
    assert config.training == {"learning_rate": 0.005, "optimizer": "adam", "gradient_clip": 10.0,
                               "batch_pixels": None, "schedule": "halve_on_either", "epochs": 80}
    recognizer = build_recognizer(CHARSET, preset=preset)
    model = build_config_network(config.network, CHARSET)
    assert model.count_params() == recognizer.count_params()
    assert model.width_reduction == recognizer.width_reduction == 16
    copy_recognizer_weights(recognizer, model)
    batch = images((10, 40), (7, 23))
    np.testing.assert_array_equal(model(batch).to_tensor().numpy(), recognizer(batch).to_tensor().numpy())


@pytest.mark.slow
def test_a_config_network_trains_step_for_step_like_the_recognizer():
    """Same weights, same batches: the same losses and the same weights after training."""
    keras.utils.set_random_seed(3)
    recognizer = build_recognizer(CHARSET, mdlstm_units=(2, 3, 4), conv_filters=(3, 5), dropout=0.0)
    model = build_config_network(tiny_network(), CHARSET)
    copy_recognizer_weights(recognizer, model)
    labels = tf.ragged.constant([[1, 2], [3]], dtype=tf.int32)
    data = tf.data.Dataset.from_tensors((images((8, 24), (6, 16), seed=4), labels)).repeat(2)
    losses = []
    for candidate in (recognizer, model):
        candidate.compile(optimizer=keras.optimizers.Adam(0.01, global_clipnorm=10), run_eagerly=True)
        losses.append(candidate.fit(data, epochs=1, verbose=0, shuffle=False).history["loss"])
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-6)
    for layer in recognizer.layers:
        if layer.weights:
            name = "output" if layer.name == "scores" else layer.name
            for a, b in zip(layer.get_weights(), model.get_layer(name).get_weights()):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_blstm_config_saves_and_loads(tmp_path):
    config = load_config("blstm")
    model = build_config_network(config.network, CHARSET, input_height=24)
    batch = images((12, 30), (12, 18))
    model.save(tmp_path / "m.keras")
    loaded = load_recognizer(tmp_path / "m.keras")
    assert isinstance(loaded, ConfigNetwork) and loaded.input_height == 24 and loaded.network == config.network
    np.testing.assert_array_equal(loaded(batch).to_tensor().numpy(), model(batch).to_tensor().numpy())
    assert loaded(batch).shape[-1] == CHARSET.num_classes
    with pytest.raises(ValueError, match="layer 'mdlstm2' has no counterpart .* weight shape"):
        copy_recognizer_weights(build_recognizer(CHARSET, (2, 3, 4), (3, 5)), model)


# ---- config files -----------------------------------------------------------------------------

def test_config_numbers_take_the_command_lines_ranges_at_their_ends(tmp_path):
    content = {"network": tiny_network(), "halve_margin": 10, "confidence_penalty": 0, "ema": None,
               "halve_start": 1, "seed": 0, "gradient_clip": None, "height": None, "epochs": 1}
    (tmp_path / "net.json").write_text(json.dumps(content))
    assert load_config(tmp_path / "net.json").training == {k: v for k, v in content.items() if k != "network"}


def test_yaml_and_json_files_give_the_same_config(tmp_path):
    content = {"network": tiny_network(), "learning_rate": 0.01, "optimizer": {"class": "sgd", "momentum": 0.9},
               "schedule": "constant", "height": 24}
    (tmp_path / "net.json").write_text(json.dumps(content))
    (tmp_path / "net.yaml").write_text(yaml.safe_dump(content))
    from_json, from_yaml = load_config(tmp_path / "net.json"), load_config(tmp_path / "net.yaml")
    assert from_json.network == from_yaml.network == content["network"]
    assert from_json.training == from_yaml.training


@pytest.mark.parametrize("text, expected", [
    ('{"network": {}}', "'network' must be a non-empty mapping"),
    ('{"network": {"o": {"class": "ctc"}}, "learning_rat": 0.1}', "unknown setting 'learning_rat'"),
    ('{"network": {"o": {"class": "ctc"}}, "epochs": 1.5}', "'epochs' must be an integer >= 1 (passes"),
    ('{"network": {"o": {"class": "ctc"}}, "epochs": 2.0}', "'epochs' must be an integer >= 1"),
    ('{"network": {"o": {"class": "ctc"}}, "halve_margin": 10.5}', "'halve_margin' must be a number in [0, 10]"),
    ('{"network": {"o": {"class": "ctc"}}, "ema": 1}', "'ema' must be a number in [0, 1) or null"),
    ('{"network": {"o": {"class": "ctc"}}, "gradient_clip": 0}', "'gradient_clip' must be a number > 0 or null"),
    ('{"network": {"o": {"class": "ctc"}}, "optimizer": "adamm"}', "'optimizer' must be one of"),
    ('{"network": {"o": {"class": "ctc"}},\n "epochs": }', "line 2"),
    ('{"network": {"o": {"class": "ctx"}}}', "layer 'o': unknown class 'ctx'"),
])
def test_bad_config_files_are_refused_naming_the_file(tmp_path, text, expected):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(NetworkConfigError) as error:
        load_config(path)
    assert str(path) in str(error.value) and expected in str(error.value), str(error.value)


# ---- tfnhr train --config ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def synth_data(tmp_path_factory):
    data = tmp_path_factory.mktemp("synth") / "data"
    assert main(["synth", "--out", str(data), "--train", "16", "--val", "4", "--test", "4",
                 "--max-chars", "12", "--quiet"]) == 0
    return data


@pytest.mark.slow
def test_train_with_a_config_file_then_evaluate(synth_data, tmp_path, capsys):
    config = {"network": tiny_network(units=(2, 4, 8), filters=(4, 8), block=(2, 2)),
              "optimizer": {"class": "sgd", "momentum": 0.9}, "learning_rate": 0.02, "gradient_clip": 5.0,
              "batch_pixels": 30000, "schedule": "constant", "epochs": 3, "height": 24}
    (tmp_path / "net.yaml").write_text(yaml.safe_dump(config))
    run = tmp_path / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["train", "--config", str(tmp_path / "net.yaml"), "--data", str(synth_data), "--out", str(run),
                     "--epochs", "1", "--quiet"]) == 0
    rows = list(csv.DictReader(open(run / "log.csv")))
    assert len(rows) == 1 and float(rows[0]["learning_rate"]) == pytest.approx(0.02)
    model = load_recognizer(run / "best.keras")
    assert isinstance(model, ConfigNetwork) and model.input_height == 24 and model.network == config["network"]
    assert isinstance(model.optimizer, keras.optimizers.SGD) and model.optimizer.global_clipnorm == 5.0
    assert model.optimizer.momentum == pytest.approx(0.9)
    assert main(["evaluate", "--model", str(run / "best.keras"), "--data", str(synth_data), "--subset", "val"]) == 0
    assert "greedy" in capsys.readouterr().out


def test_train_refuses_model_flags_with_a_config_and_bad_files(synth_data, tmp_path, capsys):
    assert main(["train", "--config", "small", "--units", "2,3,4", "--data", str(synth_data),
                 "--out", str(tmp_path)]) == 2
    assert "--units cannot be combined" in capsys.readouterr().err
    assert main(["train", "--config", "nonesuch", "--data", str(synth_data), "--out", str(tmp_path)]) == 2
    assert "nonesuch: no such config file" in capsys.readouterr().err
