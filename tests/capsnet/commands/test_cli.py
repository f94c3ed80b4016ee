"""The ``capsnet`` command line: ``place`` tables and JSON agree with :mod:`capsnet.placement`,
``train`` runs end to end (an MLCN on two logical CPUs, a tiny CapsNet) and writes a model that
reloads with its placement, and bad input ends with exit status 2 and one line on stderr.

The main runs (a placement table, training, an unknown device) are real ``python -m capsnet``
processes; variations that only print or fail before training run in this process through
:func:`capsnet.cli.main`, which is much faster than starting TensorFlow again."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import warnings

import pytest

from capsnet.cli import main
from capsnet.data import load_dataset, to_dataset
from capsnet.lanes import parse_lanes
from capsnet.models import load_model
from capsnet.placement import STRATEGIES, device_loads, lane_cost, makespan, place, placement_from_json
from tests.helpers.environment import REPO

LANE_SPEC = "5x5,1x1,3x2,2x4"
DEVICES = ["/device:GPU:0", "/device:GPU:1"]
SPEEDS = [1.0, 3.0]
PLACE = ["place", "--lane-spec", LANE_SPEC, "--devices", "gpu:0,gpu:1", "--speeds", "1,3"]
TRAIN_DATA = ["--dataset", "synthetic", "--limit-train", "128", "--limit-test", "64", "--batch-size", "32"]


def capsnet(*args: str) -> subprocess.CompletedProcess:
    """Run ``python -m capsnet ARGS`` in the repository, TensorFlow's C++ logs off."""
    return subprocess.run([sys.executable, "-m", "capsnet", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, timeout=300)


def run_main(argv: list[str], capsys) -> tuple[int, str, str]:
    """:func:`capsnet.cli.main` in this process: (exit status, stdout, stderr)."""
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's usage errors
        status = exit_.code
    out, err = capsys.readouterr()
    return status, out, err


def expected_placement(strategy: str) -> tuple[dict[int, str], list[float], dict[str, float], float]:
    """What capsnet.placement gives for ``PLACE``: placement, costs, loads per device, makespan."""
    lanes = parse_lanes(LANE_SPEC)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # idle devices
        placement = place(lanes, DEVICES, strategy, SPEEDS, seed=0, check_devices=False)
    costs = [lane_cost(lane) for lane in lanes]
    assignment = [DEVICES.index(placement[lane]) for lane in range(len(lanes))]
    loads = dict(zip(DEVICES, device_loads(costs, assignment, SPEEDS)))
    return placement, costs, loads, makespan(costs, assignment, SPEEDS)


def check_table(text: str, strategy: str) -> None:
    """``text`` is format_placement_table's table of ``strategy`` for ``PLACE``."""
    placement, costs, loads, span = expected_placement(strategy)
    lines = text.strip().splitlines()
    assert lines[0].split() == ["lane", "width", "depth", "cost", "device", "speed", "device", "load"]
    rows = [line.split() for line in lines[1:-1]]
    assert [row[0] for row in rows] == [str(lane) for lane in range(len(placement))]
    for lane, (row, spec) in enumerate(zip(rows, parse_lanes(LANE_SPEC))):
        device = placement[lane]
        assert row[1:] == [str(spec.width), str(spec.depth), f"{costs[lane]:.4g}", device,
                           f"{SPEEDS[DEVICES.index(device)]:.4g}", f"{loads[device]:.4g}"]
    assert lines[-1].startswith(f"makespan: {span:.6g} ")


@pytest.mark.subprocess
@pytest.mark.slow
def test_place_prints_the_greedy_placement_table():
    result = capsnet(*PLACE)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    check_table(result.stdout, "greedy")


def test_place_json_agrees_with_capsnet_placement(capsys):
    status, out, err = run_main([*PLACE, "--json"], capsys)
    assert (status, err) == (0, "")
    report = json.loads(out)
    placement, costs, loads, span = expected_placement("greedy")
    assert report["strategy"] == "greedy"
    assert report["lanes"] == LANE_SPEC.split(",")
    assert placement_from_json(json.dumps(report["placement"])) == placement
    assert report["costs"] == costs
    assert report["speeds"] == dict(zip(DEVICES, SPEEDS))
    assert report["loads"] == pytest.approx(loads)
    assert report["makespan"] == pytest.approx(span)


def test_place_strategy_all_prints_every_table_and_the_makespans(capsys):
    status, out, _ = run_main([*PLACE, "--strategy", "all"], capsys)
    assert status == 0
    sections = out.strip().split("\n\n")
    assert [section.splitlines()[0] for section in sections[:-1]] == [f"{strategy}:" for strategy in STRATEGIES]
    for strategy, section in zip(STRATEGIES, sections):
        check_table(section.split("\n", 1)[1], strategy)
    comparison = sections[-1]
    assert comparison.startswith("makespan by strategy: ")
    for strategy in STRATEGIES:
        assert f"{strategy} {expected_placement(strategy)[3]:.6g}" in comparison


def test_place_warns_about_idle_devices(capsys):
    status, _, err = run_main(["place", "--lane-spec", "2x1", "--devices", "gpu:0,gpu:1"], capsys)
    assert status == 0
    assert err.strip() == ("capsnet place: warning: 1 of 2 devices get no lane and stay idle "
                           "(more devices than lanes): /device:GPU:1")


TWO_GPUS = ["--devices", "gpu:0,gpu:1"]


@pytest.mark.parametrize("args, message", [
    (["--lane-spec", "4x1,2y3", *TWO_GPUS], "WIDTHxDEPTH"),
    (["--lanes", "4", "--width", "0", *TWO_GPUS], "lane width must be a positive int, got 0"),
    (["--lane-spec", "4x1,2x0", *TWO_GPUS], "lane depth must be a positive int, got 0"),
    (["--lanes", "0", *TWO_GPUS], "number of lanes must be a positive int"),
    (["--speeds", "1,2,3", *TWO_GPUS], "3 speeds for 2 devices"),
    (["--speeds", "1,fast", *TWO_GPUS], "--speeds: expected comma-separated numbers"),
    (["--speeds", "1,-3", *TWO_GPUS], "speeds must be finite and positive"),
    (["--devices", "gpu:0,sideways"], "not a device name: 'sideways'"),
    (["--devices", "gpu:0,GPU:0"], "more than once: /device:GPU:0"),
    (["--strategy", "best", *TWO_GPUS], "invalid choice: 'best'"),
    (["--probe", "--speeds", "1,2", *TWO_GPUS], "not allowed with argument --probe"),
    (["--lanes", "2"], "the following arguments are required: --devices"),
])
def test_place_rejects_bad_input_in_one_line(capsys, args, message):
    status, _, err = run_main(["place", *args], capsys)
    assert status == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("capsnet place: error: ")
    assert message in err


@pytest.fixture(scope="module")
def mlcn_run(tmp_path_factory):
    """A 2-lane MLCN trained for 2 epochs on 2 logical CPUs: (output folder, stdout)."""
    out = tmp_path_factory.mktemp("mlcn")
    result = capsnet("train", "--model", "mlcn", "--lanes", "2", "--width", "1", "--depth", "1", *TRAIN_DATA,
                     "--epochs", "2", "--devices", "cpu:0,cpu:1", "--out", str(out))
    assert result.returncode == 0, result.stderr
    return out, result.stdout


@pytest.mark.subprocess
@pytest.mark.slow
def test_train_mlcn_prints_placement_epochs_and_test_accuracy(mlcn_run):
    out, stdout = mlcn_run
    lines = stdout.strip().splitlines()
    assert lines[0].split()[:5] == ["lane", "width", "depth", "cost", "device"]
    epoch_lines = [line for line in lines if line.startswith("epoch ")]
    assert [line.split(":")[0] for line in epoch_lines] == ["epoch 1", "epoch 2"]
    assert all(" s, test accuracy " in line for line in epoch_lines)
    summary = json.loads((out / "summary.json").read_text())
    assert lines[-1] == f"test accuracy: {summary['test_accuracy']:.4f}"


@pytest.mark.subprocess
@pytest.mark.slow
def test_train_mlcn_saves_a_model_that_reloads_with_its_placement(mlcn_run):
    out, _ = mlcn_run
    placement = placement_from_json((out / "placement.json").read_text())
    assert sorted(placement) == [0, 1] and set(placement.values()) <= {"/device:CPU:0", "/device:CPU:1"}
    model = load_model(out / "model.keras")
    assert model.placement == placement
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"] == "mlcn" and summary["lanes"] == ["1x1", "1x1"]
    assert summary["params"] == model.count_params()
    assert placement_from_json(json.dumps(summary["placement"])) == placement
    assert summary["devices"] == ["/device:CPU:0", "/device:CPU:1"]
    assert summary["main_device"] == "/device:CPU:0"
    assert set(summary["speeds"]) == set(summary["devices"]) and summary["costs"] == [1.0, 1.0]
    assert (summary["train_examples"], summary["test_examples"]) == (128, 64)
    assert len(summary["epoch_seconds"]) == 2 and all(s > 0 for s in summary["epoch_seconds"])
    data = load_dataset("synthetic", limit_train=128, limit_test=64)
    metrics = model.evaluate(to_dataset(data.x_test, data.y_test, 32), return_dict=True, verbose=0)
    assert summary["test_accuracy"] == pytest.approx(metrics["accuracy"], abs=1e-6)
    assert summary["test_loss"] == pytest.approx(metrics["loss"], rel=1e-5)


@pytest.mark.subprocess
@pytest.mark.slow
def test_train_mlcn_logs_one_csv_row_per_epoch(mlcn_run):
    out, _ = mlcn_run
    rows = list(csv.DictReader(open(out / "log.csv")))
    assert [row["epoch"] for row in rows] == ["0", "1"]
    assert [float(row["learning_rate"]) for row in rows] == pytest.approx([1e-3, 0.9e-3])
    summary = json.loads((out / "summary.json").read_text())
    assert [float(row["epoch_seconds"]) for row in rows] == pytest.approx(summary["epoch_seconds"])
    assert float(rows[-1]["val_accuracy"]) == pytest.approx(summary["test_accuracy"])


@pytest.mark.subprocess
@pytest.mark.slow
def test_train_resume_continues_the_run_from_its_saved_state(mlcn_run, tmp_path):
    shutil.copytree(mlcn_run[0], tmp_path, dirs_exist_ok=True)
    before = load_model(tmp_path / "model.keras")
    assert int(before.optimizer.iterations) == 2 * 4  # 2 epochs of 128 / 32 steps, saved with the model
    args = ["train", "--model", "mlcn", "--lanes", "2", "--width", "1", "--depth", "1", *TRAIN_DATA,
            "--devices", "cpu:0,cpu:1", "--out", str(tmp_path), "--resume"]
    result = capsnet(*args, "--epochs", "3")
    assert result.returncode == 0, result.stderr
    assert f"resuming {tmp_path} after epoch 2" in result.stdout
    assert [line.split(":")[0] for line in result.stdout.splitlines() if line.startswith("epoch ")] == ["epoch 3"]
    rows = list(csv.DictReader(open(tmp_path / "log.csv")))
    assert [row["epoch"] for row in rows] == ["0", "1", "2"]
    assert float(rows[2]["learning_rate"]) == pytest.approx(1e-3 * 0.9**2)  # the schedule goes on
    after = load_model(tmp_path / "model.keras")
    assert int(after.optimizer.iterations) == 3 * 4
    assert json.loads((tmp_path / "summary.json").read_text())["resumed_after_epoch"] == 2
    again = capsnet(*args, "--epochs", "3")
    assert again.returncode == 2
    assert again.stderr.strip() == (f"capsnet train: error: --resume: {tmp_path} already holds 3 epochs; --epochs 3 "
                                    "asks for no more (give the total, e.g. --epochs 4)")


@pytest.mark.subprocess
@pytest.mark.slow
def test_train_capsnet_on_one_device(tmp_path):
    result = capsnet("train", "--model", "capsnet", "--dataset", "synthetic", "--limit-train", "32",
                     "--limit-test", "32", "--batch-size", "32", "--epochs", "1", "--devices", "cpu:1",
                     "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["model"] == "capsnet" and summary["main_device"] == "/device:CPU:1"
    assert summary["lanes"] is None and summary["placement"] is None
    assert len(summary["epoch_seconds"]) == 1 and 0.0 <= summary["test_accuracy"] <= 1.0
    assert (tmp_path / "model.keras").is_file() and not (tmp_path / "placement.json").exists()
    assert result.stdout.strip().splitlines()[-1] == f"test accuracy: {summary['test_accuracy']:.4f}"


@pytest.mark.subprocess
@pytest.mark.slow
def test_train_names_an_unknown_device_from_the_command_line(tmp_path):
    result = capsnet("train", *TRAIN_DATA, "--devices", "cpu:0,tpu:3", "--out", str(tmp_path))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("capsnet train: error: device(s) not available: /device:TPU:3;")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("args, message", [
    (["--devices", "cpu:0,gpu:7"], "device(s) not available: /device:GPU:7"),
    (["--main-device", "gpu:7"], "device(s) not available: /device:GPU:7"),
    (["--dataset", "imagenet"], "invalid choice: 'imagenet'"),
    (["--lane-spec", "4x1,4"], "WIDTHxDEPTH"),
    (["--width", "0"], "lane width must be a positive int, got 0"),
    (["--depth", "0"], "lane depth must be a positive int, got 0"),
    (["--epochs", "0"], "argument --epochs: expected a positive integer"),
    (["--lane-dropout", "1.5"], "lane_dropout must be in [0, 1)"),
    (["--devices", "cpu:0,cpu:1", "--speeds", "1,2,3"], "3 speeds for 2 devices"),
    (["--model", "capsnet", "--devices", "cpu:0,cpu:1"], "CapsNet has no lanes to place"),
    (["--resume"], "has no model.keras or log.csv (a finished capsnet train run's folder)"),
])
def test_train_rejects_bad_input_in_one_line(capsys, tmp_path, args, message):
    status, _, err = run_main(["train", *TRAIN_DATA, "--lanes", "2", "--width", "1", *args, "--out", str(tmp_path)],
                           capsys)
    assert status == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("capsnet train: error: ")
    assert message in err
    assert not list(tmp_path.iterdir())


def test_train_reports_missing_fashion_mnist(capsys, tmp_path, monkeypatch):
    import capsnet.data

    monkeypatch.setattr(capsnet.data, "DEBIAN_DIR", tmp_path / "debian")
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    monkeypatch.delenv(capsnet.data.DATA_DIR_ENV, raising=False)
    status, _, err = run_main(["train", "--data-dir", str(tmp_path / "data"), "--out", str(tmp_path / "out")], capsys)
    assert status == 2
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("capsnet train: error: Fashion-MNIST not found: ")
    assert not (tmp_path / "out").exists()
