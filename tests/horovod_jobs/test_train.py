"""``train.py --task nhr`` (:mod:`horovod_jobs.train`) under real Horovod, its options and its pieces
(``--task mlcn`` jobs: ``tests/horovod_jobs/test_train_mlcn.py``).

Real jobs: ``horovodrun -np 2 -H localhost:2 --gloo`` on loopback, each worker in its own working
directory (``rank0/``, ``rank1/``) with a relative ``--out``, so that anything rank 1 wrote would
show up in ``rank1/``: rank 0 must have written the whole output set, rank 1 nothing. A config
that differs across ranks (the launch line gives each rank another ``--batch-pixels``, through
``$HOROVOD_RANK``) and a validation set too small to shard must end the job with a one-line error
on both ranks. The jobs are launched by :mod:`tests.helpers.train_jobs`.

The distributed pieces themselves (gradient and model averaging against closed forms, metric
averaging, config hashes, dead peers) are tested in ``tests/horovod_jobs/test_distributed.py``; the
sharding in ``tests/tfnhr/data/test_batches.py``.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest

from horovod_jobs.distributed import Workers
from horovod_jobs.train import RECOGNIZER_CPU_CYCLE_TIME_MS, main as job_main, parse_args
from horovod_jobs.train_hooks import LearningRateWarmUp, RecognizerHooks, SyncOptions, worker_batches
from tests.helpers.environment import REPO
from tests.helpers.train_jobs import JOB_ENV, launch, output_tail
from tests.helpers.tiny_models import TINY_MODEL as TINY_NHR
from tfnhr.cli import main as tfnhr_main
from tfnhr.models import build_recognizer, load_recognizer
from tfnhr.training import TrainingHooks

NHR_FILES = {"best.keras", "last.keras", "state.json", "charset.json", "log.csv", "summary.json", "tensorboard", "curves.png"}


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    """A tiny synthetic line set in IAM layout (24 training, 6 validation lines)."""
    data = tmp_path_factory.mktemp("synth") / "data"
    assert tfnhr_main(["synth", "--out", str(data), "--train", "24", "--val", "6", "--test", "6",
                       "--max-chars", "16", "--quiet"]) == 0
    return data


TINY_NHR_CONFIG = """
network:
  mdlstm1: {class: mdlstm2d, n_out: 2}
  block_conv1: {class: block_conv, from: mdlstm1, n_out: 4, block: [2, 2]}
  mdlstm2: {class: mdlstm2d, from: block_conv1, n_out: 6}
  block_conv2: {class: block_conv, from: mdlstm2, n_out: 8, block: [2, 2]}
  mdlstm3: {class: mdlstm2d, from: block_conv2, n_out: 16}
  output: {class: ctc, from: mdlstm3, directions: 4}
height: 24
batch_pixels: 40000
"""
"""TINY_NHR as a config file (what the two-worker run trains, from an HDF5 copy of the data)."""


@pytest.fixture(scope="module")
def nhr_job(horovodrun, synth, tmp_path_factory) -> tuple[list[str], Path]:
    """``train.py --task nhr`` on two Gloo workers, 2 epochs of the tiny recognizer described by a
    config file, on an HDF5 copy of ``synth``: its options (what ``tfnhr train`` takes too) and the
    job's root (``rank0/``, ``rank1/``)."""
    root = tmp_path_factory.mktemp("nhr_job")
    (root / "tiny.yaml").write_text(TINY_NHR_CONFIG)
    assert tfnhr_main(["convert", "--from", "synthetic", str(synth), "--out", str(root / "data.h5"),
                       "--subsets", "train", "val", "--quiet"]) == 0
    options = ["--data", str(root / "data.h5"), "--epochs", "2", "--seed", "3", "--config", str(root / "tiny.yaml")]
    result, _ = launch(horovodrun, root / "direct", ["--task", "nhr", *options, "--out", "out"])
    assert result.returncode == 0, output_tail(result)
    assert "[1]<stdout>" not in result.stdout  # only rank 0 prints
    return options, root / "direct"


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_nhr_trains_on_two_workers_and_only_rank_0_writes(nhr_job):
    out = nhr_job[1] / "rank0" / "out"
    assert {path.name for path in out.iterdir()} == NHR_FILES
    assert not list((nhr_job[1] / "rank1").iterdir())
    rows = list(csv.DictReader(open(out / "log.csv")))
    assert [row["epoch"] for row in rows] == ["1", "2"]  # counted from 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["epochs_run"] == 2 and summary["train_examples"] == 24 and summary["val_examples"] == 6
    assert summary["best_val_cer"] == pytest.approx(min(float(row["val_cer"]) for row in rows))
    model = load_recognizer(out / "best.keras")
    assert model.layer_names[:5] == ["mdlstm1", "block_conv1", "mdlstm2", "block_conv2", "mdlstm3"]
    assert model.count_params() == build_recognizer(model.charset, (2, 6, 16), (4, 8), (2, 2)).count_params()
    assert model.input_height == 24
    assert type(load_recognizer(out / "last.keras").optimizer).__name__ == "Adam"  # saved as the plain optimizer


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_options_that_differ_across_ranks_fail_fast_on_both(horovodrun, synth, tmp_path):
    result, seconds = launch(horovodrun, tmp_path, ["--task", "nhr", "--data", str(synth), "--out", "out",
                                                    "--batch-pixels", "$((40000 + HOROVOD_RANK))", *TINY_NHR])
    assert result.returncode != 0
    for rank in range(2):
        assert f"error on rank {rank}: training options differs across ranks: rank(s) [1]" in result.stderr, \
            output_tail(result)
    assert seconds < 60
    assert not list((tmp_path / "rank0").iterdir())


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_a_validation_set_too_small_to_shard_fails_on_both(horovodrun, synth, tmp_path):
    result, _ = launch(horovodrun, tmp_path, ["--task", "nhr", "--data", str(synth), "--out", "out",
                                              "--max-val", "1", "--batch-pixels", "40000", *TINY_NHR])
    assert result.returncode != 0
    for rank in range(2):
        assert f"error on rank {rank}: 1 examples cannot fill 2 workers" in result.stderr, output_tail(result)


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_tfnhr_train_with_two_workers_is_the_horovod_job_of_its_options(nhr_job, tmp_path):
    """``tfnhr train --workers 2 ...`` (with ``--verbose`` and an abbreviated ``--work=2``, which
    the workers do not take) trains exactly what ``horovodrun -np 2 train.py --task nhr ...``
    trains with the same options: the same losses and validation CERs, the same weights."""
    options, direct = nhr_job
    handed_on = subprocess.run([sys.executable, "-m", "tfnhr.cli", "train", *options, "--out", str(tmp_path / "cli"),
                                "--verbose", "--work=2"], cwd=REPO, env=JOB_ENV, capture_output=True, text=True,
                               timeout=300, check=False)
    assert handed_on.returncode == 0, output_tail(handed_on)
    assert "[1]<stderr>" in handed_on.stdout + handed_on.stderr  # a second rank ran
    logs = [list(csv.DictReader(open(out / "log.csv"))) for out in (tmp_path / "cli", direct / "rank0" / "out")]
    assert [(row["loss"], row["val_cer"]) for row in logs[0]] == [(row["loss"], row["val_cer"]) for row in logs[1]]
    models = [load_recognizer(out / "last.keras") for out in (tmp_path / "cli", direct / "rank0" / "out")]
    for mine, theirs in zip(models[0].get_weights(), models[1].get_weights()):
        np.testing.assert_array_equal(mine, theirs)


def test_tfnhr_train_checks_its_options_before_starting_workers(tmp_path, capsys):
    assert tfnhr_main(["train", "--data", str(tmp_path / "missing"), "--out", str(tmp_path / "out"),
                       "--workers", "2", "--config", str(tmp_path / "missing.yaml")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("tfnhr train: error: ") and "missing.yaml" in error and error.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_tfnhr_train_checks_the_data_listing_before_starting_workers(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for data, reason in ((tmp_path / "missing", "does not exist"), (tmp_path / "empty", "is not an IAM folder")):
        assert tfnhr_main(["train", "--data", str(data), "--out", str(tmp_path / "out"), "--workers", "2"]) == 2
        error = capsys.readouterr().err
        assert error.startswith("tfnhr train: error: ") and reason in error and error.count("\n") == 1, error


@pytest.mark.parametrize(("argv", "expected"), [
    (["train", "--data", "d", "--workers", "2", "--out", "o"], ["--data", "d", "--out", "o"]),
    (["train", "--workers=4", "--verbose", "--lr", "0.1"], ["--lr", "0.1"]),
    (["train", "--data", "train", "--wo", "2", "--ve", "--validate-every", "5"], ["--data", "train", "--validate-every", "5"]),
])
def test_worker_arguments_drop_what_only_tfnhr_train_takes(argv, expected):
    from tfnhr.commands.train import worker_arguments

    assert worker_arguments(argv) == expected


@pytest.mark.parametrize("argv, message", [
    (["--data", "d"], "the following arguments are required: --task"),
    (["--task", "nhr", "--data", "d", "--warmup-steps", "5"], "add --scale-lr"),
    (["--task", "mlcn", "--units", "2,6"], "unrecognized arguments: --units"),  # an nhr option
    (["--task", "nhr", "--data", "d", "--average-every", "0"], "--average-every must be >= 1"),
    (["--task", "mlcn", "--parallel", "model", "--model", "capsnet"], "it needs --model mlcn and --sync gradients"),
    (["--task", "mlcn", "--parallel", "model", "--sync", "average"], "it needs --model mlcn and --sync gradients"),
    (["--task", "mlcn", "--data-groups", "2"], "add --parallel model"),
    (["--task", "mlcn", "--parallel", "model", "--data-groups", "0"], "--data-groups must be >= 1"),
    (["--task", "nhr", "--data", "d", "--parallel", "model"], "unrecognized arguments: --parallel"),
])
def test_bad_options_end_with_a_usage_error(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_each_task_takes_its_command_options():
    nhr = parse_args(["--task", "nhr", "--data", "d", "--sync", "average", *TINY_NHR, "--halve-on", "cer"])
    assert (nhr.mdlstm_units, nhr.block, nhr.halve_on, nhr.sync, nhr.average_every) == ((2, 6, 16), [(2, 2)], "cer",
                                                                                "average", 16)
    mlcn = parse_args(["--task", "mlcn", "--lane-spec", "4x1,2x3", "--devices", "cpu:0,cpu:1", "--scale-lr"])
    assert (mlcn.lane_spec, mlcn.devices, mlcn.scale_lr, mlcn.sync) == ("4x1,2x3", "cpu:0,cpu:1", True, "gradients")


THREADS_PROBE = """
import os
import sys
import warnings

import keras
import tensorflow as tf

from horovod_jobs.train import main


class Probe(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        print("threads", tf.config.threading.get_intra_op_parallelism_threads(),
              tf.config.threading.get_inter_op_parallelism_threads(), flush=True)
        print("cycle", os.environ.get("HOROVOD_CYCLE_TIME"), flush=True)
        warnings.warn("probe warning")
        self.model.stop_training = True


sys.exit(main(sys.argv[1:], callbacks=[Probe()]))
"""
"""``train.py`` in a fresh process (a world of one) that prints TensorFlow's thread pools and
Horovod's cycle time as training starts, and warns once."""


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_recognizer_worker_sizes_its_thread_pools_before_the_first_op(synth, tmp_path):
    """``--threads 1`` holds although the job's config check runs TensorFlow ops before training
    (it used to be ignored there: the pools were TensorFlow's default, all cores). On a host
    without GPUs the worker also polls its peers every 5 ms, not Horovod's 1 ms. Its warnings
    are one line each, as ``tfnhr train`` prints them (no Python source line)."""
    env = {name: value for name, value in JOB_ENV.items()
           if not name.startswith("TF_NUM_") and name != "HOROVOD_CYCLE_TIME"}
    result = subprocess.run([sys.executable, "-c", THREADS_PROBE, "--task", "nhr", "--data", str(synth),
                             "--out", str(tmp_path / "out"), *TINY_NHR, "--epochs", "1", "--threads", "1"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, output_tail(result)
    assert "threads 1 1" in result.stdout, output_tail(result)
    assert f"cycle {RECOGNIZER_CPU_CYCLE_TIME_MS:g}" in result.stdout, output_tail(result)
    assert "train.py --task nhr: warning: probe warning\n" in result.stderr, output_tail(result)
    assert "warnings.warn" not in result.stderr, output_tail(result)


def test_a_workers_default_threads_are_its_share_of_the_cores():
    cores = len(os.sched_getaffinity(0))
    sync = SyncOptions("gradients", 1, 0, 0)
    shares = [RecognizerHooks(Workers(0, size, 0, local), sync).threads() for size, local in ((1, 1), (4, 2), (8, 8 * cores))]
    assert shares == [cores, max(1, cores // 2), 1]
    assert TrainingHooks().threads() == cores  # one process: every core


def test_worker_batches_are_disjoint_equal_slices_reshuffled_every_epoch():
    x = np.arange(10, dtype=np.float32).reshape(10, 1, 1, 1)
    y = np.arange(10, dtype=np.int32)
    datasets = [worker_batches(x, y, 2, seed=0, workers=Workers(rank, 3, rank, 3)) for rank in range(3)]
    epochs = [[np.concatenate([labels.numpy() for _, labels in dataset]) for dataset in datasets] for _ in range(2)]
    for seen in epochs:
        assert [len(labels) for labels in seen] == [3, 3, 3]
        assert len(set(np.concatenate(seen))) == 9  # disjoint; one of 10 left over
    assert not all(np.array_equal(a, b) for a, b in zip(*epochs))
    assert all(int(dataset.cardinality()) == 2 for dataset in datasets)


def test_warm_up_scales_the_rate_that_epoch_schedules_set():
    """Warm-up over 4 batches from 1/4 of the rate; the epoch schedule halves the rate at epoch 2,
    and the warm-up factors apply to the halved rate; between epochs the optimizer holds the
    unscaled rate."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    seen, at_epoch_end = [], []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: seen.append(float(model.optimizer.learning_rate)),
        on_epoch_end=lambda epoch, logs: at_epoch_end.append(float(model.optimizer.learning_rate)))
    schedule = keras.callbacks.LearningRateScheduler(lambda epoch, _: 0.8 / 2**epoch)
    model.fit(np.ones((6, 2)), np.ones((6, 1)), batch_size=2, epochs=2, verbose=0,
              callbacks=[schedule, LearningRateWarmUp(4, 0.25), record])
    expected = [0.8 * f for f in (0.25, 0.4375, 0.625)] + [0.4 * f for f in (0.8125, 1.0, 1.0)]
    np.testing.assert_allclose(seen, expected, rtol=1e-6)
    np.testing.assert_allclose(at_epoch_end, [0.8, 0.4], rtol=1e-6)


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_a_killed_recognizer_worker_ends_the_job_with_one_line_that_says_how_to_resume(synth, horovodrun, tmp_path):
    """Rank 1 is killed (SIGKILL) once rank 0 has logged its first epoch: rank 0 says in one line
    that a peer died (or that the launcher stopped it) and how to continue; then ``--resume``
    continues the run from its first epoch."""
    from tests.helpers.train_jobs import signal_rank_1_after_first_epoch

    args = ["--task", "nhr", "--data", str(synth), *TINY_NHR, "--batch-pixels", "20000", "--threads", "1",
            "--out", str(tmp_path / "run")]
    result, _ = launch(horovodrun, tmp_path / "killed", [*args, "--epochs", "200"],
                       prefix=signal_rank_1_after_first_epoch("KILL").replace("../rank0/out/log.csv",
                                                                              str(tmp_path / "run" / "log.csv")))
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.startswith("[0]<stderr>:train.py --task nhr: ")]
    assert len(lines) == 1, output_tail(result)
    assert ("error on rank 0: a peer rank died or stopped answering" in lines[0]
            or "rank 0 stopped by the launcher: another rank ended first" in lines[0]), lines[0]
    assert lines[0].endswith(f"run the same command with --resume (into {tmp_path / 'run'})")
    resumed, _ = launch(horovodrun, tmp_path / "resumed", [*args, "--epochs", "2", "--resume"])
    assert resumed.returncode == 0, output_tail(resumed)
    assert [row["epoch"] for row in csv.DictReader(open(tmp_path / "run" / "log.csv"))][-1] == "2"


def test_an_option_error_names_the_flag(synth, tmp_path, capfd):
    """An error the caller fixes with a setting speaks in flags here, as ``tfnhr train`` does (the
    library's message names the Python setting)."""
    assert job_main(["--task", "nhr", "--data", str(synth), *TINY_NHR, "--batch-pixels", "200", "--epochs", "1",
                 "--out", str(tmp_path / "run")]) == 2
    error = capfd.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("train.py --task nhr: error on rank 0: the pixel budget 200 must hold two of the largest")
    assert error.endswith("raise the budget (--batch-pixels) or scale the images down (--height)")
