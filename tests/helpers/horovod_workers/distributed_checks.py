"""Worker side of ``tests/horovod_jobs/test_distributed.py``: run under ``horovodrun -np 2``.

``python tests/helpers/horovod_workers/distributed_checks.py --check GROUP --out DIR`` runs one
group of checks of :mod:`horovod_jobs.distributed` on this rank and writes what it measured to
``DIR/rank{r}.json``; the test compares the ranks' files with each other and with NumPy
references (closed forms, single-process computations), and imports this module for its constants
and ``linear_model``. The project must be importable (the venv's editable install, or the
repository on ``PYTHONPATH``, as the test sets it). Groups:

* ``core``: gradient averaging against the union batch, one clipped SGD step, ``fit`` with
  BroadcastInitialState + AverageMetrics + root_only (also run under Open MPI).
* ``train``: ``core`` plus model averaging every K steps, log averaging, config hash and
  batch-count agreement.
* ``failures``: rank 1 passes another config to ``check_same_config`` (each rank records its
  error); then both train with synchronised gradients and rank 1 kills itself (SIGKILL) after 3
  steps; rank 0 records how and when its training stopped, and exits non-zero.
* ``stuck``: (one process, no launcher) a step that never ends, under a ProgressWatchdog.

Each worker uses one intra-op and one inter-op thread.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

# Linear model + MSE on every rank: x [N, D] -> x @ kernel + bias, [N, K].
N, D, K = 6, 3, 2
LEARNING_RATE = 0.1
CLIPNORM = 0.05  # below the union gradient's norm, so the clipped step tells the order apart
AVERAGE_EVERY = 3


def rank_data(rank: int, steps: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """This rank's ``steps`` batches, ``x`` float32 ``[steps * N, D]``, ``y`` ``[steps * N, K]``."""
    rng = np.random.default_rng(1000 + rank)
    return (rng.normal(size=(steps * N, D)).astype(np.float32),
            rng.normal(size=(steps * N, K)).astype(np.float32))


def linear_model(seed: int):
    """``Dense(K)`` on ``D`` inputs, weights drawn from ``seed``."""
    import keras

    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((D,)), keras.layers.Dense(K, bias_initializer="random_normal")])


def weights(model) -> list:
    return [w.tolist() for w in model.get_weights()]


def check_gradient(rank: int) -> dict:
    """Averaged gradients of the mean-squared error at common weights; ``None`` kept; an
    ``IndexedSlices`` gradient (row counts of a gather) averaged densely."""
    import keras
    import tensorflow as tf

    from horovod_jobs.distributed import average_gradients

    model = linear_model(seed=0)  # the same weights on both ranks
    x, y = rank_data(rank)
    unused = keras.Variable(np.zeros(3, np.float32))
    table = tf.Variable(np.zeros((5, 2), np.float32))
    rows = tf.constant([rank, 2, 2 + 2 * rank])
    with tf.GradientTape() as tape:
        loss = keras.losses.MeanSquaredError()(y, model(x))
        gathered = tf.reduce_sum(tf.gather(table, rows))
    grads = tape.gradient([loss, gathered], [*model.trainable_variables, unused, table])
    averaged = average_gradients(grads)
    return {"x": x.tolist(), "y": y.tolist(), "weights": weights(model),
            "grads": [g.numpy().tolist() for g in averaged[:2]],
            "unused_is_none": averaged[2] is None,
            "sparse_input": isinstance(grads[3], tf.IndexedSlices),
            "sparse_rows": rows.numpy().tolist(), "sparse_grad": averaged[3].numpy().tolist()}


def check_sgd_step(rank: int, clipnorm: float) -> dict:
    """One ``fit`` step of SGD with ``global_clipnorm`` on this rank's batch, gradients synced."""
    import keras

    from horovod_jobs.distributed import distributed_optimizer

    model = linear_model(seed=0)
    model.compile(optimizer=distributed_optimizer(keras.optimizers.SGD(LEARNING_RATE, global_clipnorm=clipnorm)),
                  loss="mse", jit_compile=False)
    x, y = rank_data(rank)
    model.fit(x, y, batch_size=N, epochs=1, shuffle=False, verbose=0)
    return {"weights": weights(model)}


def check_average(rank: int, every: int) -> dict:
    """``every`` steps of ``sync="average"`` SGD with momentum from common weights, with the
    weights after each step, next to the same steps by a plain optimizer (the local reference)."""
    import keras

    from horovod_jobs.distributed import distributed_optimizer

    x, y = rank_data(rank, steps=every)
    trajectories = {}
    for name in ("distributed", "local"):
        model = linear_model(seed=0)
        optimizer = keras.optimizers.SGD(LEARNING_RATE, momentum=0.5)
        if name == "distributed":
            optimizer = distributed_optimizer(optimizer, sync="average", average_every=every)
        model.compile(optimizer=optimizer, loss="mse", jit_compile=False)
        after = trajectories[name] = []
        record = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs, m=model, into=after:
                                                into.append(weights(m)))
        model.fit(x, y, batch_size=N, epochs=1, shuffle=False, verbose=0, callbacks=[record])
    return trajectories


def record_logs(into: list):
    """A callback appending a copy of each epoch's logs to ``into``."""
    import keras

    return keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: into.append(dict(logs)))


def check_fit(workers, out: Path) -> dict:
    """``fit`` with ``sync="gradients"`` Adam from rank-dependent initial weights."""
    import keras

    from horovod_jobs.distributed import AverageMetrics, BroadcastInitialState, distributed_optimizer, root_only

    rank = workers.rank
    model = linear_model(seed=10 + rank)
    initial = weights(model)
    model.compile(optimizer=distributed_optimizer(keras.optimizers.Adam(0.05)), loss="mse",
                  metrics=["mae"], jit_compile=False)
    x, y = rank_data(rank, steps=4)
    raw, averaged = [], []
    callbacks = [BroadcastInitialState(), record_logs(raw), AverageMetrics(), record_logs(averaged),
                 *root_only([keras.callbacks.CSVLogger(str(out / f"log_rank{rank}.csv"))], workers)]
    history = model.fit(x, y, batch_size=N, epochs=3, shuffle=False, verbose=0, callbacks=callbacks)
    return {"initial": initial, "final": weights(model), "raw_logs": raw, "averaged_logs": averaged,
            "history": history.history, "iterations": int(model.optimizer.iterations.numpy())}


def check_logs(rank: int) -> dict:
    """AverageMetrics on hand-made logs, and on logs whose keys differ across ranks."""
    from horovod_jobs.distributed import AverageMetrics

    raw = {"loss": 1.5 + rank, "val_cer": np.float32(0.25 * rank), "steps": 3 + rank, "note": f"rank {rank}"}
    logs = dict(raw)
    AverageMetrics().on_epoch_end(0, logs)
    extra = {"loss": 1.0, **({"extra": 2.0} if rank == 1 else {})}
    try:
        AverageMetrics().on_epoch_end(0, extra)
        mismatch = None
    except RuntimeError as error:
        mismatch = str(error)
    return {"averaged": logs, "mismatch_error": mismatch}


def check_agreement(rank: int) -> dict:
    from horovod_jobs.distributed import agreed_batch_count, check_same_config

    check_same_config({"units": [4, 20], "block": [2, 2], "rank_independent": True})
    return {"same_config_ok": True, "agreed_batch_count": agreed_batch_count(3 + 2 * rank)}


def run_core(workers, out: Path) -> dict:
    """Placement and failure settings, gradients, one SGD step, ``fit`` in sync."""
    from horovod_jobs.distributed import FAILURE_TIMEOUTS

    return {"workers": {**dataclasses.asdict(workers), "is_root": workers.is_root},
            "failure_env": {name: os.environ.get(name) for name in FAILURE_TIMEOUTS},
            "gradient": check_gradient(workers.rank),
            "sgd_step": check_sgd_step(workers.rank, clipnorm=CLIPNORM),
            "fit": check_fit(workers, out)}


def run_train(workers, out: Path) -> dict:
    return {**run_core(workers, out), "average": check_average(workers.rank, every=AVERAGE_EVERY),
            "logs": check_logs(workers.rank), "agreement": check_agreement(workers.rank)}


def check_config_mismatch(rank: int) -> dict:
    """Rank 1 passes another config: the error it raises on each rank, and how long that took."""
    from horovod_jobs.distributed import check_same_config

    started = time.monotonic()
    try:
        check_same_config({"units": [4, 20 + rank]}, what="recognizer config")
        error = None
    except RuntimeError as caught:
        error = str(caught)
    return {"error": error, "seconds": time.monotonic() - started}


def run_failures(workers, out: Path) -> dict:
    """A config mismatch (recorded, then go on), then a dead peer: ``fit`` with synchronised
    gradients where rank 1 kills itself (SIGKILL) after 3 steps. Rank 0 records how and when its
    training stopped; it ignores the launcher's SIGTERM (which comes within its 5 s grace before
    SIGKILL) so that the record shows Horovod's own failure."""
    import keras

    from horovod_jobs.distributed import BroadcastInitialState, distributed_optimizer

    log = out / f"rank{workers.rank}.json"
    result = {"config_mismatch": check_config_mismatch(workers.rank)}
    log.write_text(json.dumps(result))
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    model = linear_model(seed=0)
    model.compile(optimizer=distributed_optimizer(keras.optimizers.SGD(0.01)), loss="mse", jit_compile=False)
    x, y = rank_data(workers.rank, steps=1000)
    step_ends = []  # time.monotonic() at the end of each step

    def step_done(batch, logs):
        step_ends.append(time.monotonic())
        if workers.rank == 1 and batch == 2:
            os.kill(os.getpid(), signal.SIGKILL)

    try:
        model.fit(x, y, batch_size=N, epochs=1, verbose=0, callbacks=[
            BroadcastInitialState(), keras.callbacks.LambdaCallback(on_train_batch_end=step_done)])
    except Exception as error:  # noqa: BLE001 (record whatever Horovod raises)
        result["dead_peer"] = {"steps": len(step_ends), "error": f"{type(error).__name__}: {error}",
                               "seconds_after_last_step": time.monotonic() - step_ends[-1]}
        log.write_text(json.dumps(result))
        raise
    raise SystemExit("training went on after the peer died")


def run_stuck(workers, out: Path) -> dict:
    """One process whose step never ends (as when it waits for a stuck peer), with a 2 s
    ProgressWatchdog: the process must exit 1 by itself."""
    import keras

    from horovod_jobs.distributed import ProgressWatchdog

    model = linear_model(seed=0)
    model.compile(optimizer="sgd", loss="mse", jit_compile=False)
    x, y = rank_data(workers.rank, steps=4)
    hang = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: batch == 1 and time.sleep(120))
    model.fit(x, y, batch_size=N, epochs=1, verbose=0, callbacks=[ProgressWatchdog(2.0), hang])
    raise SystemExit("the watchdog did not end the process")


GROUPS = {"train": run_train, "core": run_core, "failures": run_failures, "stuck": run_stuck}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", choices=sorted(GROUPS), required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from horovod_jobs.distributed import init_workers

    workers = init_workers()
    result = GROUPS[args.check](workers, args.out)
    (args.out / f"rank{workers.rank}.json").write_text(json.dumps(result, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
