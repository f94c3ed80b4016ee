"""``capsnet.training`` from Python, without a command line: a ``TrainConfig`` is all a notebook
needs, and the CLI makes the same one from its flags."""

from __future__ import annotations

import argparse
import dataclasses
import json

import keras
import numpy as np
import pytest

from capsnet.arguments import add_train_arguments, config_from_args
from capsnet.models import load_model
from capsnet.training import TrainConfig, prepare, train


@pytest.mark.slow
def test_train_config_from_python_trains_and_writes(tmp_path):
    config = TrainConfig(model="mlcn", lane_spec="1x1,2x1", dataset="synthetic", limit_train=64, limit_test=32,
                         epochs=1, batch_size=16, devices="cpu:0,cpu:1", speeds="equal", out=tmp_path)
    summary = train(config)
    assert summary["lanes"] == ["1x1", "2x1"] and summary["epochs"] == 1
    assert 0 <= summary["test_accuracy"] <= 1
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["test_accuracy"] == summary["test_accuracy"]
    model = load_model(tmp_path / "model.keras")
    data = prepare(dataclasses.replace(config, devices=None)).data
    probabilities = model.predict(data.x_test[:4], verbose=0)
    assert np.asarray(keras.ops.convert_to_numpy(probabilities)).shape[0] == 4


def test_the_command_line_builds_the_same_config():
    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    assert config_from_args(parser.parse_args([])) == TrainConfig()
    args = parser.parse_args(["--lane-spec", "4x1,2x3", "--epochs", "2", "--devices", "cpu:0,cpu:1"])
    assert config_from_args(args) == TrainConfig(lane_spec="4x1,2x3", epochs=2, devices="cpu:0,cpu:1")


def test_bad_lane_spec_is_a_value_error():
    with pytest.raises(ValueError):
        TrainConfig(lane_spec="4y1").lane_list()
