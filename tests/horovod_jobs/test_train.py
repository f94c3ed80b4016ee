"""``train.py --task nhr|mlcn`` (:mod:`horovod_jobs.train`) under real Horovod, and its pieces.

Real jobs: ``horovodrun -np 2 -H localhost:2 --gloo`` on loopback, each worker in its own working
directory (``rank0/``, ``rank1/``) with a relative ``--out``, so that anything rank 1 wrote would
show up in ``rank1/``: rank 0 must have written the whole output set, rank 1 nothing. A config
that differs across ranks (the launch line gives each rank another ``--batch-pixels``, through
``$HOROVOD_RANK``) and a validation set too small to shard must end the job with a one-line error
on both ranks. One plain process (a world of one) runs ``--task mlcn`` in this process.

The distributed pieces themselves (gradient and model averaging against closed forms, metric
averaging, config hashes, dead peers) are tested in ``tests/horovod_jobs/test_distributed.py``; the
sharding in ``tests/tfnhr/data/test_batches.py``.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np
import pytest

from capsnet.models import load_model
from horovod_jobs.distributed import Workers
from horovod_jobs.train import RECOGNIZER_CPU_CYCLE_TIME_MS, main, parse_args, peer_failure
from horovod_jobs.train_hooks import LearningRateWarmUp, RecognizerHooks, SyncOptions, worker_batches
from tests.helpers.environment import REPO
from tests.helpers.tiny_models import TINY_MODEL as TINY_NHR
from tfnhr.cli import main as tfnhr_main
from tfnhr.models import build_recognizer, load_recognizer
from tfnhr.training import TrainingHooks

TINY_MLCN = ["--model", "mlcn", "--lanes", "2", "--width", "1", "--depth", "1", "--dataset", "synthetic",
             "--limit-train", "128", "--limit-test", "64", "--batch-size", "32"]
NHR_FILES = {"best.keras", "last.keras", "state.json", "charset.json", "log.csv", "summary.json", "tensorboard", "curves.png"}
MLCN_FILES = {"model.keras", "placement.json", "log.csv", "summary.json"}
# 200 epochs of the tiny MLCN over 2 ranks, for the tests that stop a rank mid-training. Round robin:
# each rank surely gets one of the 2 lanes (greedy on probed speeds may leave a rank that probed
# slow on a loaded machine without one, and the job then fails before training).
LONG_MODEL_PARALLEL_MLCN = ["--task", "mlcn", *TINY_MLCN, "--epochs", "200", "--threads", "1",
                            "--parallel", "model", "--placement", "round_robin", "--out", "out"]
JOB_ENV = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "",
           "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    """A tiny synthetic line set in IAM layout (24 training, 6 validation lines)."""
    data = tmp_path_factory.mktemp("synth") / "data"
    assert tfnhr_main(["synth", "--out", str(data), "--train", "24", "--val", "6", "--test", "6",
                       "--max-chars", "16", "--quiet"]) == 0
    return data


def launch(horovodrun: Path, root: Path, args: list[str], ranks: int = 2, prefix: str = "exec",
           env: dict | None = None) -> tuple[subprocess.CompletedProcess, float]:
    """``train.py ARGS`` on ``ranks`` local Gloo workers, rank r in ``root/rank{r}``; returns the
    finished launcher and its wall seconds. ``$HOROVOD_RANK`` in ``args`` and ``prefix`` (the
    shell commands before the worker's, ending in ``exec``) is expanded per rank; ``env`` is added
    to the workers' environment."""
    for rank in range(ranks):
        (root / f"rank{rank}").mkdir(parents=True)
    script = f'cd "{root}/rank$HOROVOD_RANK" && {prefix} "{sys.executable}" "{REPO / "train.py"}" {" ".join(args)}'
    started = time.monotonic()
    result = subprocess.run([str(horovodrun), "-np", str(ranks), "-H", f"localhost:{ranks}", "--gloo",
                             "sh", "-c", script],
                            cwd=REPO, env={**JOB_ENV, **(env or {})}, capture_output=True, text=True, timeout=300, check=False)
    return result, time.monotonic() - started


def signal_rank_1_after_first_epoch(signal: str) -> str:
    """A :func:`launch` prefix: once rank 0 has written its first ``log.csv`` row, rank 1 writes the
    time to ``rank1/signalled`` and sends itself ``SIG<signal>``."""
    return (f'if [ "$HOROVOD_RANK" = 1 ]; then (until [ -s ../rank0/out/log.csv ]; do sleep 0.2; done; '
            f'date +%s.%N > signalled; kill -{signal} $$) & fi; exec')


def output_tail(result: subprocess.CompletedProcess) -> str:
    return result.stdout[-3000:] + result.stderr[-3000:]


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


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_nhr_trains_on_two_workers_and_only_rank_0_writes(horovodrun, synth, tmp_path):
    (tmp_path / "tiny.yaml").write_text(TINY_NHR_CONFIG)
    assert tfnhr_main(["convert", "--from", "synthetic", str(synth), "--out", str(tmp_path / "data.h5"),
                       "--subsets", "train", "val", "--quiet"]) == 0
    result, _ = launch(horovodrun, tmp_path, ["--task", "nhr", "--data", str(tmp_path / "data.h5"), "--out", "out",
                                              "--epochs", "2", "--config", str(tmp_path / "tiny.yaml")])
    assert result.returncode == 0, output_tail(result)
    out = tmp_path / "rank0" / "out"
    assert {path.name for path in out.iterdir()} == NHR_FILES
    assert not list((tmp_path / "rank1").iterdir())
    assert "[1]<stdout>" not in result.stdout  # only rank 0 prints
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
def test_mlcn_model_averaging_on_two_workers(horovodrun, tmp_path):
    result, _ = launch(horovodrun, tmp_path, ["--task", "mlcn", *TINY_MLCN, "--epochs", "2", "--devices", "cpu:0,cpu:1",
                                              "--threads", "1", "--sync", "average", "--average-every", "2",
                                              "--scale-lr", "--warmup-steps", "2", "--out", "out"])
    assert result.returncode == 0, output_tail(result)
    out = tmp_path / "rank0" / "out"
    assert {path.name for path in out.iterdir()} == MLCN_FILES
    assert not list((tmp_path / "rank1").iterdir())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["learning_rate"] == pytest.approx(2e-3)  # --scale-lr: 1e-3 x 2 workers
    assert 0 <= summary["test_accuracy"] <= 1
    assert [row["epoch"] for row in csv.DictReader(open(out / "log.csv"))] == ["0", "1"]
    model = load_model(out / "model.keras")
    assert len(model.lanes) == 2


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_mlcn_model_parallel_on_two_ranks_trains_and_resumes_as_one_process(horovodrun, tmp_path):
    """Lanes spread over 2 ranks, one epoch, then ``--resume`` for a second: the same logged losses
    and accuracies, and the same saved weights, as the whole model trained for two epochs in one
    plain process (same seed, same batches)."""
    args = ["--task", "mlcn", *TINY_MLCN[:2], "--lane-spec", "1x1,2x1,1x2", *TINY_MLCN[8:], "--threads", "1"]
    out = tmp_path / "model_out"  # one folder for both ranks: --resume reads it on every rank
    result, _ = launch(horovodrun, tmp_path / "first", [*args, "--parallel", "model", "--epochs", "1", "--out", str(out)])
    assert result.returncode == 0, output_tail(result)
    assert {path.name for path in out.iterdir()} == MLCN_FILES
    assert not list((tmp_path / "first" / "rank1").iterdir())
    assert "predicted load" in result.stdout and "[1]<stdout>" not in result.stdout
    placement = json.loads((out / "placement.json").read_text())
    assert sorted(placement) == ["0", "1", "2"] and {lane["rank"] for lane in placement.values()} == {0, 1}
    result, _ = launch(horovodrun, tmp_path / "resumed",
                       [*args, "--parallel", "model", "--epochs", "2", "--resume", "--out", str(out)])
    assert result.returncode == 0, output_tail(result)
    assert f"resuming {out} after epoch 1" in result.stdout
    (tmp_path / "alone").mkdir()
    alone_run = subprocess.run([sys.executable, str(REPO / "train.py"), *args, "--epochs", "2", "--out", "out"],
                               cwd=tmp_path / "alone", env=JOB_ENV, capture_output=True, text=True, timeout=300,
                               check=False)
    assert alone_run.returncode == 0, output_tail(alone_run)
    alone = tmp_path / "alone" / "out"
    logged = [list(csv.DictReader(open(folder / "log.csv"))) for folder in (out, alone)]
    assert [row["epoch"] for row in logged[0]] == ["0", "1"]
    for key in ("loss", "margin_loss", "accuracy", "val_loss", "val_accuracy", "learning_rate"):
        np.testing.assert_allclose([float(row[key]) for row in logged[0]], [float(row[key]) for row in logged[1]],
                                   rtol=1e-5, err_msg=key)
    spread, whole = load_model(out / "model.keras"), load_model(alone / "model.keras")
    assert spread.count_params() == whole.count_params()
    assert int(spread.optimizer.iterations) == int(whole.optimizer.iterations) == 2 * 4
    for a, b in zip(spread.get_weights(), whole.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    for a, b in zip(spread.optimizer.variables, whole.optimizer.variables, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-7)


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_mlcn_model_parallel_rank_that_dies_ends_the_job(horovodrun, tmp_path):
    """Rank 1 is killed (SIGKILL) mid-training, once rank 0 has logged its first epoch: every rank
    exits, non-zero, within seconds (well before the 200 epochs or the launcher's 300-s limit)."""
    args = LONG_MODEL_PARALLEL_MLCN
    result, _ = launch(horovodrun, tmp_path, args, prefix=signal_rank_1_after_first_epoch("KILL"))
    ended = time.time()
    assert result.returncode != 0
    assert (tmp_path / "rank1" / "signalled").is_file(), output_tail(result)
    assert ended - float((tmp_path / "rank1" / "signalled").read_text()) < 30, output_tail(result)
    assert "Process 1 exit with status code 137" in result.stdout + result.stderr, output_tail(result)


def test_peer_failure_names_both_errors_a_dead_peer_can_cause():
    """A rank whose peer stops sees either Horovod's shutdown or, when its own collective times out first,
    Gloo's transport error (both seen from ``test_mlcn_model_parallel_rank_that_hangs_ends_the_job``)."""
    shut_down = "Horovod has been shut down. This was caused by an exception on one of the ranks"
    timed_out = ("[gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 10000ms for recv operation to complete\n"
                 "\t [[{{node capsnet.replicated_gradients}}]] [Op:__inference_multi_step_on_iterator_4218]")
    assert peer_failure(shut_down) == "Horovod has been shut down"
    assert peer_failure(timed_out) == "Timed out waiting"
    assert peer_failure("Incompatible shapes: [4,10] vs. [4,12]") is None


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_mlcn_model_parallel_rank_that_hangs_ends_the_job(horovodrun, tmp_path):
    """Rank 1 freezes (SIGSTOP) mid-training, once rank 0 has logged its first epoch: rank 0's
    collective times out after Gloo's timeout (10 s here), it exits with a one-line reason, and
    ``horovodrun`` ends rank 1 (well before the 200 epochs or the launcher's 300-s limit)."""
    args = LONG_MODEL_PARALLEL_MLCN
    result, _ = launch(horovodrun, tmp_path, args, prefix=signal_rank_1_after_first_epoch("STOP"),
                       env={"HOROVOD_GLOO_TIMEOUT_SECONDS": "10"})
    ended = time.time()
    assert result.returncode != 0
    assert (tmp_path / "rank1" / "signalled").is_file(), output_tail(result)
    assert ended - float((tmp_path / "rank1" / "signalled").read_text()) < 10 + 30, output_tail(result)
    assert "error on rank 0: a peer rank died or stopped answering" in result.stderr, output_tail(result)


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_a_model_parallel_rank_without_a_lane_fails_on_every_rank(horovodrun, tmp_path):
    args = ["--task", "mlcn", *TINY_MLCN, "--epochs", "1", "--parallel", "model", "--out", "out"]
    result, _ = launch(horovodrun, tmp_path, args, ranks=3)
    assert result.returncode != 0
    for rank in range(3):  # which rank stays empty depends on the probed speeds
        assert re.search(f"error on rank {rank}: rank\\(s\\) [0-2] get no lane; 2 lanes cannot occupy 3 ranks: "
                         "start fewer ranks", result.stderr), output_tail(result)


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
def test_tfnhr_train_with_two_workers_is_the_horovod_job_of_its_options(horovodrun, synth, tmp_path):
    """``tfnhr train --workers 2 ...`` (with ``--verbose`` and an abbreviated ``--work=2``, which
    the workers do not take) trains exactly what ``horovodrun -np 2 train.py --task nhr ...``
    trains with the same options: the same losses and validation CERs, the same weights."""
    options = ["--data", str(synth), "--epochs", "2", "--batch-pixels", "40000", "--seed", "3", *TINY_NHR]
    handed_on = subprocess.run([sys.executable, "-m", "tfnhr.cli", "train", *options, "--out", str(tmp_path / "cli"),
                                "--verbose", "--work=2"], cwd=REPO, env=JOB_ENV, capture_output=True, text=True,
                               timeout=300, check=False)
    assert handed_on.returncode == 0, output_tail(handed_on)
    assert "[1]<stderr>" in handed_on.stdout + handed_on.stderr  # a second rank ran
    direct, _ = launch(horovodrun, tmp_path / "direct", ["--task", "nhr", *options, "--out", "out"])
    assert direct.returncode == 0, output_tail(direct)
    logs = [list(csv.DictReader(open(out / "log.csv"))) for out in (tmp_path / "cli", tmp_path / "direct" / "rank0" / "out")]
    assert [(row["loss"], row["val_cer"]) for row in logs[0]] == [(row["loss"], row["val_cer"]) for row in logs[1]]
    models = [load_recognizer(out / "last.keras") for out in (tmp_path / "cli", tmp_path / "direct" / "rank0" / "out")]
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


@pytest.mark.slow
def test_mlcn_runs_as_one_plain_process(tmp_path):
    assert main(["--task", "mlcn", *TINY_MLCN, "--epochs", "1", "--out", str(tmp_path)]) == 0
    assert {path.name for path in tmp_path.iterdir()} == MLCN_FILES - {"placement.json"}
    assert json.loads((tmp_path / "summary.json").read_text())["train_examples"] == 128


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
