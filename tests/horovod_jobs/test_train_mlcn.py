"""``train.py --task mlcn`` (:mod:`horovod_jobs.train`) under real Horovod: model averaging over
two workers, lanes spread over ranks (trained and resumed as one plain process trains them), a
rank that dies or hangs mid-training, a rank left without a lane; and one plain process.

The jobs run as in ``tests/horovod_jobs/test_train.py`` (each rank in its own working folder,
:mod:`tests.helpers.train_jobs`)."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import time

import numpy as np
import pytest

from capsnet.models import load_model
from horovod_jobs.train import main, peer_failure
from tests.helpers.environment import REPO
from tests.helpers.train_jobs import JOB_ENV, launch, output_tail, signal_rank_1_after_first_epoch

TINY_MLCN = ["--model", "mlcn", "--lanes", "2", "--width", "1", "--depth", "1", "--dataset", "synthetic",
             "--limit-train", "128", "--limit-test", "64", "--batch-size", "32"]
MLCN_FILES = {"model.keras", "placement.json", "log.csv", "summary.json"}
# 200 epochs of the tiny MLCN over 2 ranks, for the tests that stop a rank mid-training. Round robin:
# each rank surely gets one of the 2 lanes (greedy on probed speeds may leave a rank that probed
# slow on a loaded machine without one, and the job then fails before training).
LONG_MODEL_PARALLEL_MLCN = ["--task", "mlcn", *TINY_MLCN, "--epochs", "200", "--threads", "1",
                            "--parallel", "model", "--placement", "round_robin", "--out", "out"]


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
    for rank in range(3):  # which ranks stay empty (one or two) depends on the probed speeds
        assert re.search(f"error on rank {rank}: rank\\(s\\) [0-2](, [0-2])? get no lane; "
                         "2 lanes cannot occupy 3 ranks: start fewer ranks", result.stderr), output_tail(result)


@pytest.mark.slow
def test_mlcn_runs_as_one_plain_process(tmp_path):
    assert main(["--task", "mlcn", *TINY_MLCN, "--epochs", "1", "--out", str(tmp_path)]) == 0
    assert {path.name for path in tmp_path.iterdir()} == MLCN_FILES - {"placement.json"}
    assert json.loads((tmp_path / "summary.json").read_text())["train_examples"] == 128
