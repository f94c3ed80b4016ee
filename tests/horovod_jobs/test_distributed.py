"""Distributed training pieces (:mod:`horovod_jobs.distributed`) under real Horovod.

Two workers on loopback (``horovodrun -np 2 -H localhost:2 --gloo``) run the check groups of
``tests/helpers/horovod_workers/distributed_checks.py`` and write their measurements per rank; here
they are compared with each other and with references computed in this process (NumPy closed forms,
single-process Keras). Two Gloo launches (the training checks; the failures: a config mismatch,
then a dead peer) and one under Open MPI where Horovod was built with it; a ProgressWatchdog
check in one plain process; single-process tests (a world of one) cover the rest.

Tolerances: float32 arithmetic on values of order 1 over at most 12 terms, so gradients and
weights are compared at ``rtol=1e-5, atol=1e-6`` (the NumPy references run in float64); weights
that must be *identical* across ranks (both apply the same averaged gradient) are compared
exactly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import horovod.tensorflow as hvd
import keras
import numpy as np
import pytest
import tensorflow as tf

from horovod_jobs.distributed import (FAILURE_TIMEOUTS, AverageMetrics, AverageModelAtEpochEnd,
                                      BroadcastInitialState, Workers, distributed_optimizer,
                                      root_only, scale_learning_rate)
from tests.helpers.environment import REPO
from tests.helpers.horovod_workers import distributed_checks
from tests.helpers.horovod_workers.distributed_checks import (AVERAGE_EVERY, CLIPNORM, LEARNING_RATE, N,
                                                              linear_model, rank_data)

WORKER = Path(distributed_checks.__file__)
"""The worker program (a helper module, also imported here for its constants)."""
WORKER_ENV = {**{k: v for k, v in os.environ.items() if k not in FAILURE_TIMEOUTS},  # the defaults apply
              "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
TOLERANCE = {"rtol": 1e-5, "atol": 1e-6}


def launch(horovodrun: Path, group: str, out: Path, controller: list[str] | None = None
           ) -> tuple[subprocess.CompletedProcess, float]:
    """Run check ``group`` on 2 local workers; returns the finished process and its wall seconds."""
    command = [str(horovodrun), "-np", "2", "-H", "localhost:2", *(controller or ["--gloo"]),
               sys.executable, str(WORKER), "--check", group, "--out", str(out)]
    started = time.monotonic()
    result = subprocess.run(command, cwd=REPO, env=WORKER_ENV, capture_output=True, text=True, timeout=240,
                            check=False)
    return result, time.monotonic() - started


def output_tail(result: subprocess.CompletedProcess) -> str:
    return result.stdout[-3000:] + result.stderr[-3000:]


def reports(out: Path) -> list[dict]:
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(2)]


def arrays(weights: list) -> list[np.ndarray]:
    return [np.asarray(w, dtype=np.float64) for w in weights]


def mse_gradient(x: np.ndarray, y: np.ndarray, kernel: np.ndarray, bias: np.ndarray) -> list[np.ndarray]:
    """Gradient of ``mean((x @ kernel + bias - y) ** 2)`` (over all entries) w.r.t. (kernel, bias)."""
    residual = x @ kernel + bias - y
    scale = 2.0 / residual.size
    return [scale * x.T @ residual, scale * residual.sum(axis=0)]


def union_gradient(gradient_reports: list[dict]) -> list[np.ndarray]:
    """The closed-form gradient over both ranks' batches together, at their (common) weights."""
    x = np.concatenate([np.asarray(r["x"], np.float64) for r in gradient_reports])
    y = np.concatenate([np.asarray(r["y"], np.float64) for r in gradient_reports])
    return mse_gradient(x, y, *arrays(gradient_reports[0]["weights"]))


def assert_gradient_is_the_union_gradient(ranks: list[dict]) -> None:
    gradients = [r["gradient"] for r in ranks]
    assert gradients[0]["weights"] == gradients[1]["weights"]
    assert gradients[0]["x"] != gradients[1]["x"]
    expected = union_gradient(gradients)
    row_counts = sum(np.bincount(r["sparse_rows"], minlength=5) for r in gradients) / 2
    for r in gradients:
        for got, want in zip(arrays(r["grads"]), expected):
            np.testing.assert_allclose(got, want, **TOLERANCE)
        assert r["unused_is_none"]
        assert r["sparse_input"]  # the gather's gradient was IndexedSlices, averaged densely:
        np.testing.assert_array_equal(r["sparse_grad"], np.repeat(row_counts[:, None], 2, axis=1))


def assert_sgd_step_is_the_union_step(ranks: list[dict]) -> None:
    """One SGD step with ``global_clipnorm``: the union gradient, clipped after averaging."""
    gradients = [r["gradient"] for r in ranks]
    weights = arrays(gradients[0]["weights"])

    def clipped(grads):
        norm = np.sqrt(sum((g ** 2).sum() for g in grads))
        return [g * CLIPNORM / max(norm, CLIPNORM) for g in grads], norm

    (step, norm) = clipped(union_gradient(gradients))
    assert norm > CLIPNORM  # the clip is active...
    per_rank = [clipped(mse_gradient(np.asarray(r["x"]), np.asarray(r["y"]), *weights))[0] for r in gradients]
    clipped_first = [(a + b) / 2 for a, b in zip(*per_rank)]
    assert max(np.abs(a - b).max() for a, b in zip(step, clipped_first)) > 1e-3  # ...and tells the orders apart
    for r in ranks:
        for got, w, g in zip(arrays(r["sgd_step"]["weights"]), weights, step):
            np.testing.assert_allclose(got, w - LEARNING_RATE * g, **TOLERANCE)


def assert_fit_ends_in_sync_as_one_process_on_the_union(ranks: list[dict]) -> None:
    fits = [r["fit"] for r in ranks]
    assert not np.allclose(arrays(fits[0]["initial"])[0], arrays(fits[1]["initial"])[0])  # started apart
    for a, b in zip(arrays(fits[0]["final"]), arrays(fits[1]["final"])):
        np.testing.assert_array_equal(a, b)
    assert fits[0]["iterations"] == fits[1]["iterations"] == 12  # 3 epochs x 4 steps
    # One process from rank 0's initial weights, each step on both ranks' batches together.
    model = linear_model(seed=0)
    model.set_weights([np.asarray(w, np.float32) for w in fits[0]["initial"]])
    optimizer, loss = keras.optimizers.Adam(0.05), keras.losses.MeanSquaredError()
    (x0, y0), (x1, y1) = rank_data(0, steps=4), rank_data(1, steps=4)
    for _ in range(3):
        for step in range(4):
            rows = slice(step * N, (step + 1) * N)
            x, y = np.concatenate([x0[rows], x1[rows]]), np.concatenate([y0[rows], y1[rows]])
            with tf.GradientTape() as tape:
                value = loss(y, model(x))
            optimizer.apply(tape.gradient(value, model.trainable_variables), model.trainable_variables)
    for got, want in zip(arrays(fits[0]["final"]), model.get_weights()):
        np.testing.assert_allclose(got, want, **TOLERANCE)


@pytest.fixture(scope="module")
def train_run(horovodrun, tmp_path_factory) -> tuple[Path, list[dict]]:
    out = tmp_path_factory.mktemp("train")
    result, _ = launch(horovodrun, "train", out)
    assert result.returncode == 0, output_tail(result)
    return out, reports(out)


def assert_two_workers_with_failure_bounds(ranks: list[dict]) -> None:
    for rank, r in enumerate(ranks):
        assert r["workers"] == {"rank": rank, "size": 2, "local_rank": rank, "local_size": 2, "is_root": rank == 0}
        assert r["failure_env"] == FAILURE_TIMEOUTS


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_init_workers_places_each_rank_and_sets_failure_bounds(train_run):
    assert_two_workers_with_failure_bounds(train_run[1])


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_averaged_gradient_equals_the_gradient_of_the_union_batch(train_run):
    assert_gradient_is_the_union_gradient(train_run[1])


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_one_sgd_step_equals_one_process_on_the_union_batch_clipped_after_averaging(train_run):
    assert_sgd_step_is_the_union_step(train_run[1])


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_fit_from_different_initial_weights_ends_identical_on_both_ranks(train_run):
    assert_fit_ends_in_sync_as_one_process_on_the_union(train_run[1])


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_model_averaging_every_k_steps_gives_the_mean_of_the_local_models(train_run):
    # Per rank and step: the weights after it, distributed and by a plain optimizer on the same data.
    distributed = [[arrays(w) for w in r["average"]["distributed"]] for r in train_run[1]]
    local = [[arrays(w) for w in r["average"]["local"]] for r in train_run[1]]
    for step in range(AVERAGE_EVERY - 1):  # local steps only: each rank follows its own data
        for rank in range(2):
            for got, want in zip(distributed[rank][step], local[rank][step]):
                np.testing.assert_allclose(got, want, **TOLERANCE)
        assert not np.allclose(local[0][step][0], local[1][step][0])
    last = AVERAGE_EVERY - 1
    mean = [(a + b) / 2 for a, b in zip(local[0][last], local[1][last])]
    for rank in range(2):
        for got, want in zip(distributed[rank][last], mean):
            np.testing.assert_allclose(got, want, **TOLERANCE)


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_epoch_logs_are_replaced_by_their_mean_over_the_ranks(train_run):
    ranks = train_run[1]
    fits = [r["fit"] for r in ranks]
    for epoch, (raw0, raw1) in enumerate(zip(fits[0]["raw_logs"], fits[1]["raw_logs"])):
        assert raw0 != raw1
        for r in fits:
            mean = {k: (raw0[k] + raw1[k]) / 2 for k in raw0}
            assert r["averaged_logs"][epoch] == pytest.approx(mean, rel=1e-12)
            assert {k: v[epoch] for k, v in r["history"].items()} == r["averaged_logs"][epoch]
    for rank, r in enumerate(ranks):
        logs = r["logs"]
        assert logs["averaged"] == {"loss": 2.0, "val_cer": 0.125, "steps": 3.5, "note": f"rank {rank}"}
        assert "ranks log different metrics" in logs["mismatch_error"] and "'extra'" in logs["mismatch_error"]


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_root_only_callbacks_write_on_rank_zero_only(train_run):
    out, ranks = train_run
    assert not (out / "log_rank1.csv").exists()
    lines = (out / "log_rank0.csv").read_text().splitlines()
    losses = [float(line.split(",")[1]) for line in lines[1:]]
    assert losses == pytest.approx([logs["loss"] for logs in ranks[0]["fit"]["averaged_logs"]], rel=1e-12)


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_ranks_agree_on_config_and_batch_count(train_run):
    for r in train_run[1]:
        assert r["agreement"] == {"same_config_ok": True, "agreed_batch_count": 5}  # max(3, 3 + 2)


@pytest.fixture(scope="module")
def failures_run(horovodrun, tmp_path_factory) -> tuple[subprocess.CompletedProcess, float, list[dict]]:
    out = tmp_path_factory.mktemp("failures")
    result, seconds = launch(horovodrun, "failures", out)
    return result, seconds, reports(out)


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_config_mismatch_raises_on_every_rank_at_once(failures_run):
    for r in failures_run[2]:
        mismatch = r["config_mismatch"]
        assert mismatch["error"].startswith(
            "recognizer config differs across ranks: rank(s) [1] differ from rank 0")
        assert mismatch["seconds"] < 5


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_a_dead_peer_fails_the_survivor_within_seconds_and_the_job_exits_non_zero(failures_run):
    result, seconds, ranks = failures_run
    assert result.returncode != 0, output_tail(result)
    assert seconds < 60, seconds
    assert "exit with status code 137" in result.stdout + result.stderr  # rank 1's SIGKILL
    survivor = ranks[0]["dead_peer"]
    assert survivor["steps"] == 3  # rank 1 died after its third step; the fourth cannot complete
    assert "Horovod has been shut down" in survivor["error"]
    assert survivor["seconds_after_last_step"] < 10


@pytest.mark.subprocess
@pytest.mark.slow
def test_progress_watchdog_ends_a_process_whose_step_never_finishes(tmp_path):
    started = time.monotonic()
    result = subprocess.run([sys.executable, str(WORKER), "--check", "stuck", "--out", str(tmp_path)], cwd=REPO,
                            env=WORKER_ENV, capture_output=True, text=True, timeout=100, check=False)
    assert result.returncode == 1, output_tail(result)
    assert "ProgressWatchdog: no batch finished for 2 s" in result.stderr
    assert time.monotonic() - started < 60  # the hanging step sleeps 120 s


@pytest.mark.horovod
@pytest.mark.subprocess
@pytest.mark.slow
def test_open_mpi_controller_gives_the_same_results(horovodrun, tmp_path):
    if not hvd.mpi_built():  # what ``horovodrun --check-build`` reports as "[X] MPI", without its ~20 s
        pytest.skip("Horovod built without MPI (no Open MPI on this machine)")
    # Oversubscribed on few cores: let idle ranks yield instead of spinning.
    mpi_args = "--oversubscribe --mca mpi_yield_when_idle 1"
    if os.geteuid() == 0:
        mpi_args += " --allow-run-as-root"
    result, _ = launch(horovodrun, "core", tmp_path, ["--mpi", f"--mpi-args={mpi_args}"])
    assert result.returncode == 0, output_tail(result)
    ranks = reports(tmp_path)
    assert_two_workers_with_failure_bounds(ranks)
    assert_gradient_is_the_union_gradient(ranks)
    assert_sgd_step_is_the_union_step(ranks)
    assert_fit_ends_in_sync_as_one_process_on_the_union(ranks)


# -- one process: a world of size 1 ---------------------------------------------------------------

@pytest.fixture(scope="module")
def alone() -> None:
    """Horovod in this process: a world of one. (Not ``init_workers``, which would pin this test
    session to one GPU on a GPU host.)"""
    hvd.init()
    assert hvd.size() == 1


def fit_weights(optimizer, data) -> list[np.ndarray]:
    """Weights after one epoch of ``fit`` on ``data`` (3 batches) from the seed-0 linear model."""
    model = linear_model(seed=0)
    model.compile(optimizer=optimizer, loss="mse", jit_compile=False)
    model.fit(*data, batch_size=N, epochs=1, shuffle=False, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 3
    return model.get_weights()


@pytest.mark.parametrize("sync", ["gradients", "average"])
def test_alone_the_distributed_optimizer_trains_like_the_plain_one(alone, sync):
    data = rank_data(0, steps=3)
    plain = fit_weights(keras.optimizers.Adam(0.05, global_clipnorm=0.5), data)
    wrapped = fit_weights(distributed_optimizer(keras.optimizers.Adam(0.05, global_clipnorm=0.5), sync,
                                                average_every=2), data)
    for a, b in zip(plain, wrapped):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-7)
    assert not np.allclose(plain[0], linear_model(seed=0).get_weights()[0])  # it did train


def test_saved_model_loads_without_horovod_as_the_plain_base_optimizer(alone, tmp_path):
    schedule = scale_learning_rate(0.01, 2, warmup_steps=10)
    optimizer = distributed_optimizer(keras.optimizers.Adam(schedule, global_clipnorm=1.0), "average", 3)
    assert isinstance(optimizer, keras.optimizers.Adam) and type(optimizer) is not keras.optimizers.Adam
    model = linear_model(seed=0)
    model.compile(optimizer=optimizer, loss="mse", jit_compile=False)
    model.fit(*rank_data(0, steps=2), batch_size=N, verbose=0)
    path = tmp_path / "model.keras"
    model.save(path)
    saved = json.loads(zipfile.ZipFile(path).read("config.json"))["compile_config"]["optimizer"]
    assert (saved["module"], saved["class_name"]) == ("keras.src.optimizers.adam", "Adam")
    loaded = keras.models.load_model(path).optimizer
    assert type(loaded) is keras.optimizers.Adam
    assert loaded.get_config() == optimizer.get_config()
    assert int(loaded.iterations.numpy()) == 2
    assert float(loaded.learning_rate) == pytest.approx(0.01 * (1 + 2 / 10))  # the warm-up at step 2


def test_wrapping_a_built_optimizer_keeps_its_state(alone):
    model = linear_model(seed=0)
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse", jit_compile=False)
    model.fit(*rank_data(0, steps=2), batch_size=N, verbose=0)
    wrapped = distributed_optimizer(model.optimizer)
    assert wrapped.built and len(wrapped.variables) == len(model.optimizer.variables)
    for a, b in zip(wrapped.variables, model.optimizer.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert int(wrapped.iterations.numpy()) == 2


def test_distributed_optimizer_rejects_bad_arguments():
    with pytest.raises(ValueError, match="sync must be one of"):
        distributed_optimizer(keras.optimizers.SGD(), sync="models")
    with pytest.raises(ValueError, match="average_every must be >= 1"):
        distributed_optimizer(keras.optimizers.SGD(), sync="average", average_every=0)
    with pytest.raises(ValueError, match="already distributed"):
        distributed_optimizer(distributed_optimizer(keras.optimizers.SGD()))


def test_scale_learning_rate_warms_up_linearly_to_lr_times_size():
    assert scale_learning_rate(0.01, 4) == pytest.approx(0.04)
    schedule = scale_learning_rate(0.01, 4, warmup_steps=100)
    for step, expected in [(0, 0.01), (50, 0.025), (100, 0.04), (1000, 0.04)]:
        assert float(schedule(step)) == pytest.approx(expected, rel=1e-6)
    restored = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert float(restored(25)) == pytest.approx(0.0175, rel=1e-6)
    with pytest.raises(ValueError, match="size >= 1"):
        scale_learning_rate(0.01, 0)


def test_root_only_keeps_callbacks_on_rank_zero_only():
    callbacks = [keras.callbacks.History()]
    assert root_only(callbacks, Workers(0, 2, 0, 2)) == callbacks
    assert root_only(callbacks, Workers(1, 2, 1, 2)) == []


def test_alone_the_callbacks_leave_training_unchanged_for_dropout_and_batch_norm(alone):
    """Broadcast (every variable, the dropout seed's int64 state too) and averaging are identities
    in a world of one, so training equals plain training from the same seed."""
    def train(callbacks):
        keras.utils.set_random_seed(5)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dropout(0.5),
                                  keras.layers.BatchNormalization(), keras.layers.Dense(2)])
        assert any(v.dtype == "int64" for v in model.variables)
        model.compile(optimizer=distributed_optimizer(keras.optimizers.Adam(0.05), "average", 2), loss="mse",
                      jit_compile=False)
        history = model.fit(*rank_data(0, steps=3), batch_size=N, epochs=2, verbose=0, callbacks=callbacks)
        return model.get_weights(), history.history

    plain, plain_history = train([])
    synced, synced_history = train([BroadcastInitialState(), AverageModelAtEpochEnd(), AverageMetrics()])
    for a, b in zip(plain, synced):
        np.testing.assert_array_equal(a, b)
    assert synced_history["loss"] == pytest.approx(plain_history["loss"], rel=1e-12)


def test_broadcast_refuses_an_unbuilt_model(alone):
    model = keras.Sequential([keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    with pytest.raises(RuntimeError, match="needs a built model"):
        model.fit(np.ones((4, 3)), np.ones((4, 2)), verbose=0, callbacks=[BroadcastInitialState()])
