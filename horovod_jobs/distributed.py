"""Data-parallel training of Keras 3 models with core ``horovod.tensorflow`` ops.

Horovod's own Keras layer does not work under Keras 3 (see docs/horovod.md), so this module provides the pieces on top of the core collectives:

* :func:`init_workers` -- ``hvd.init()`` with bounded failure timeouts, one GPU per local rank.
* :func:`distributed_optimizer` -- wraps a Keras optimizer so that its ``apply`` either averages
  the gradients across ranks first (``sync="gradients"``, synchronous data parallelism) or takes
  a local step and averages the updated variables every ``average_every`` steps
  (``sync="average"``, RETURNN's model averaging, Doetsch et al. 2017, §4.1). Every
  ``train_step`` that calls ``self.optimizer.apply(grads, variables)`` (Keras' own, the
  recognizer's, the capsule classifier's) is thereby distributed without changes.
* Callbacks: :class:`BroadcastInitialState` (everyone starts from rank 0's weights and optimizer
  state), :class:`AverageMetrics` (epoch logs averaged, so LR halving, early stopping and
  checkpoint decisions agree on every rank), :class:`AverageModelAtEpochEnd` (model averaging
  mode), and :func:`root_only` for callbacks that write (checkpoints, CSV, TensorBoard).
* :class:`ProgressWatchdog` -- exits a worker whose training makes no progress (a stuck peer).
* :func:`check_same_config` -- a config hash compared across ranks at start;
  :func:`agreed_batch_count` -- one number of steps per epoch for every rank;
  :func:`scale_learning_rate` -- learning rate times world size, with linear warm-up.

Compile models with ``jit_compile=False``: Keras turns XLA on by default on GPU hosts, and
Horovod's ops are not XLA ops. Importing this module does not initialise Horovod; in a plain
process (no ``horovodrun``) ``hvd.init()`` gives a world of size 1, where everything here reduces
to ordinary single-process training.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Iterable, Sequence

import horovod.tensorflow as hvd
import keras
import numpy as np
import tensorflow as tf

# Failure bounds, set (unless already in the environment) before ``hvd.init()``:
# * HOROVOD_GLOO_TIMEOUT_SECONDS: how long a Gloo operation waits for a peer: the rendezvous at
#   start, and every receive (``horovodrun --gloo-timeout-seconds`` sets it for its workers).
# * HOROVOD_STALL_CHECK_TIME_SECONDS: after this long with some ranks not submitting a tensor
#   that others did, rank 0 logs which ranks and tensors are missing (seen under MPI only).
# * HOROVOD_STALL_SHUTDOWN_TIME_SECONDS: after this long stalled, Horovod shuts down and every
#   pending collective raises on the waiting ranks (seen under MPI only).
# What we measured (2 workers on one host, Horovod 0.28.1):
# * a peer that dies (crash, ``kill -9``): its sockets close, the survivor's pending collective
#   raises within 0.1 s ("Connection reset by peer", then "Horovod has been shut down"), and
#   ``horovodrun`` terminates the remaining workers as soon as one exits non-zero;
# * a peer that is frozen whole (SIGSTOP, a hung host): Gloo's receive times out after
#   HOROVOD_GLOO_TIMEOUT_SECONDS (60 s) and the survivor raises;
# * a peer that is alive but stops submitting tensors: under MPI the stall check warns and shuts
#   down as configured; under Gloo it never fired (no warning, no shutdown after 400 s), so
#   only :class:`ProgressWatchdog` bounds that case.
FAILURE_TIMEOUTS = {
    "HOROVOD_GLOO_TIMEOUT_SECONDS": "60",
    "HOROVOD_STALL_CHECK_TIME_SECONDS": "30",
    "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "90",
}
CYCLE_TIME = "HOROVOD_CYCLE_TIME"
"""Milliseconds between the cycles of Horovod's background thread. Each cycle the ranks exchange
what is ready to reduce, whether anything is or not: at Horovod's default of 1 ms (since 0.21;
5 ms before) two single-threaded recognizer workers on a 2-core host spent 9-16 % of a core each
on that polling (its threads' CPU time, measured), taken from the training threads.
:func:`init_workers` sets it (unless set) where asked and no GPU is used."""
SYNC_MODES = ("gradients", "average")
DYNAMIC_PROCESS_SETS = "HOROVOD_DYNAMIC_PROCESS_SETS"
"""Set to 1 before ``hvd.init()`` to allow ``hvd.add_process_set`` (model-parallel replicas)."""


@dataclasses.dataclass(frozen=True)
class Workers:
    """This process's place in the job: ``rank`` in ``0..size-1``, ``local_rank`` in
    ``0..local_size-1`` among the workers on this host."""

    rank: int
    size: int
    local_rank: int
    local_size: int

    @property
    def is_root(self) -> bool:
        """Rank 0: the one worker that prints, logs and writes checkpoints."""
        return self.rank == 0


def init_workers(pin_gpu: bool = True, process_sets: bool = False, cpu_cycle_time_ms: float | None = None) -> Workers:
    """Initialise Horovod once (bounded failure timeouts, see :data:`FAILURE_TIMEOUTS`) and pin
    this worker to GPU ``local_rank`` (modulo the GPU count) with memory growth, if there are
    GPUs. Call it before TensorFlow creates any tensor (device settings are fixed after that).

    ``pin_gpu=False``: every GPU of the host stays visible, each with memory growth (a worker
    that places lanes on several GPUs). ``process_sets``: allow ``hvd.add_process_set`` later
    (sets ``HOROVOD_DYNAMIC_PROCESS_SETS=1``; the model-parallel replicas need it).
    ``cpu_cycle_time_ms``: Horovod's cycle (:data:`CYCLE_TIME`) on a host without GPUs, unless
    the environment sets it (``horovodrun --cycle-time-ms`` does); ``None``: Horovod's default."""
    for name, value in FAILURE_TIMEOUTS.items():
        os.environ.setdefault(name, value)
    if process_sets:
        os.environ[DYNAMIC_PROCESS_SETS] = "1"
    gpus = tf.config.list_physical_devices("GPU")
    if cpu_cycle_time_ms is not None and not gpus:
        os.environ.setdefault(CYCLE_TIME, f"{cpu_cycle_time_ms:g}")
    if not hvd.is_initialized():
        hvd.init()
    workers = Workers(hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size())
    if gpus and not pin_gpu:
        for gpu in gpus:
            tf.config.experimental.set_memory_growth(gpu, True)
    elif gpus:
        mine = gpus[workers.local_rank % len(gpus)]
        tf.config.experimental.set_memory_growth(mine, True)
        tf.config.set_visible_devices(mine, "GPU")
    return workers


def average_gradients(grads: Sequence[tf.Tensor | tf.IndexedSlices | None]) -> list[tf.Tensor | None]:
    """Each gradient averaged over the ranks, in one grouped allreduce.

    ``None`` entries (variables the loss does not reach; the same on every rank, as they follow
    from the model's structure) stay ``None`` and take no part. ``tf.IndexedSlices`` (gradients
    of gathers, e.g. embeddings) are made dense first: correct, at the cost of sending the full
    variable shape.
    """
    present = [i for i, grad in enumerate(grads) if grad is not None]
    averaged = list(grads)
    if present:
        dense = [tf.convert_to_tensor(grads[i]) for i in present]
        for i, grad in zip(present, hvd.grouped_allreduce(dense, op=hvd.Average)):
            averaged[i] = grad
    return averaged


def average_variables(variables: Iterable[keras.Variable]) -> None:
    """Assign to each floating-point variable its average over the ranks, in one grouped
    allreduce; every rank must pass the same variables in the same order."""
    variables = list(variables)
    if variables:
        averaged = hvd.grouped_allreduce([tf.convert_to_tensor(v) for v in variables], op=hvd.Average)
        for variable, value in zip(variables, averaged):
            variable.assign(value)


def broadcast_variables(variables: Iterable[keras.Variable], root: int = 0) -> None:
    """Assign to each variable rank ``root``'s value (``v.assign(hvd.broadcast(v.value, root))``,
    the form that works for Keras 3 variables)."""
    for variable in variables:
        variable.assign(hvd.broadcast(variable.value, root_rank=root))


class _Distributed:
    """Mixin put before a Keras optimizer class by :func:`distributed_optimizer`; the instance
    attributes ``sync`` and ``average_every`` are set there."""

    sync: str
    average_every: int

    def apply(self, grads, trainable_variables=None):
        if self.sync == "gradients":
            # Averaged before the base class unscales and clips (in ``apply`` and
            # ``_clip_gradients``): every rank clips the same gradient.
            return super().apply(average_gradients(grads), trainable_variables)
        super().apply(grads, trainable_variables)
        variables = self._trainable_variables if trainable_variables is None else list(trainable_variables)
        # ``iterations`` (already incremented) is equal on every rank after BroadcastInitialState,
        # so all ranks take the same branch; tf.cond keeps this valid inside a traced train_step.
        tf.cond(self.iterations % self.average_every == 0, lambda: average_variables(variables),
                lambda: None)
        return None


@functools.lru_cache(maxsize=None)
def _distributed_class(base: type) -> type:
    """The subclass of optimizer class ``base`` with :class:`_Distributed`'s ``apply``.

    It carries ``base``'s name and module, so a model compiled with it saves its optimizer as
    ``base`` (same config) and loads anywhere, Horovod or not, as a plain ``base``."""
    return type(base.__name__, (_Distributed, base),
                {"__module__": base.__module__, "__qualname__": f"Distributed{base.__qualname__}",
                 "__doc__": f"{base.__name__} with Horovod synchronisation in ``apply``."})


def distributed_optimizer(optimizer: keras.optimizers.Optimizer, sync: str = "gradients",
                          average_every: int = 1) -> keras.optimizers.Optimizer:
    """A copy of ``optimizer`` whose ``apply(grads, trainable_variables=None)`` synchronises the
    ranks.

    Args:
      optimizer: a Keras optimizer (its config is copied with ``from_config``: learning-rate
        schedules, clipping, weight decay carry over; so does its state, if it is built, e.g. one
        loaded with a model to resume from).
      sync: ``"gradients"``: gradients averaged over the ranks (one grouped allreduce) before the
        update, so every rank takes the same step as one process on the union of the ranks'
        batches would (for losses that are means over equal-size batches). ``clipnorm`` /
        ``global_clipnorm`` / ``clipvalue`` then apply to the *averaged* gradient, identically
        on every rank. ``"average"``: every rank takes its own step; after every
        ``average_every``-th step (counted by ``optimizer.iterations``) the variables just
        updated are replaced by their average over the ranks. Optimizer slots (momenta) stay
        local; add :class:`AverageModelAtEpochEnd` to also average at each epoch end.
      average_every: steps between averagings, ``>= 1`` (``sync="average"`` only).

    Returns:
      An instance of a subclass of ``type(optimizer)``. It saves (``get_config``, ``model.save``)
      as that base class with the base config, so a saved model loads without Horovod and gets
      the plain base optimizer back; wrap it again to resume distributed training.

    Raises:
      ValueError: unknown ``sync``, ``average_every < 1``, or an optimizer that is already
        distributed.
    """
    if sync not in SYNC_MODES:
        raise ValueError(f"sync must be one of {SYNC_MODES}, got {sync!r}")
    if average_every < 1:
        raise ValueError(f"average_every must be >= 1, got {average_every}")
    if isinstance(optimizer, _Distributed):
        raise ValueError("this optimizer is already distributed; pass the plain one")
    distributed = _distributed_class(type(optimizer)).from_config(optimizer.get_config())
    distributed.sync, distributed.average_every = sync, average_every
    if optimizer.built:
        distributed.build(optimizer._trainable_variables)  # noqa: SLF001 (no public accessor)
        for target, source in zip(distributed.variables, optimizer.variables, strict=True):
            target.assign(source)
    return distributed


class BroadcastInitialState(keras.callbacks.Callback):
    """At the start of ``fit``: every rank takes rank ``root``'s model variables and optimizer
    state (built here if needed), so ranks that initialised differently start equal.

    The model must be built before ``fit`` (Keras builds subclassed models lazily, inside the
    first step, which would be too late to broadcast)."""

    def __init__(self, root: int = 0) -> None:
        super().__init__()
        self.root = root

    def on_train_begin(self, logs: dict | None = None) -> None:
        model = self.model
        if not model.built or not model.trainable_variables:
            raise RuntimeError("BroadcastInitialState needs a built model: build it (call it on a "
                               "batch, or model.build(...)) before fit")
        if not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        broadcast_variables(list(model.variables) + list(model.optimizer.variables), self.root)


def _digests(text: str) -> list[str]:
    """The sha256 hex digest of ``text`` on every rank, by rank (one allgather)."""
    digest = np.frombuffer(hashlib.sha256(text.encode()).digest(), dtype=np.uint8)
    gathered = hvd.allgather(tf.constant(digest[None, :]), name="horovod_jobs.digest").numpy()
    return [row.tobytes().hex() for row in gathered]


def _differing_ranks(digests: Sequence[str]) -> list[int]:
    return [rank for rank, digest in enumerate(digests) if digest != digests[0]]


def check_same_config(config: dict, what: str = "model config") -> None:
    """Raise ``RuntimeError`` on every rank unless ``config`` (JSON-able; compared as canonical
    JSON, keys sorted) is the same on all ranks. One allgather of 32-byte sha256 digests, so
    a mismatch fails at once on all ranks instead of hanging later on mismatched tensors."""
    digests = _digests(json.dumps(config, sort_keys=True, separators=(",", ":"), default=str))
    differing = _differing_ranks(digests)
    if differing:
        raise RuntimeError(f"{what} differs across ranks: rank(s) {differing} differ from rank 0 "
                           f"(sha256 {[d[:12] for d in digests]} by rank); start every worker with "
                           "the same options and data")


class AverageMetrics(keras.callbacks.Callback):
    """At each epoch end, replace every numeric entry of ``logs`` by its mean over the ranks
    (one allreduce of a float64 vector, keys in sorted order).

    Put it after the callbacks that *add* entries (e.g. ``ValidationErrorRates``) and before
    every callback that *reads* them (learning-rate halving, early stopping, checkpoints, CSV,
    TensorBoard): usually first, and in any case before those, so every rank takes the same
    decisions from the same numbers. The mean of per-rank means is the overall mean when the
    ranks' shares are equal (equal step counts, near-equal shards). All ranks must log the same
    keys; otherwise ``RuntimeError`` on every rank, naming the keys.
    """

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if logs:
            average_logs(logs)


def _is_number(value) -> bool:
    array = np.asarray(value)
    return array.ndim == 0 and (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating))


def average_logs(logs: dict) -> None:
    """Replace, in place, each numeric scalar in ``logs`` by its mean over the ranks (as float)."""
    keys = sorted(key for key, value in logs.items() if _is_number(value))
    if _differing_ranks(_digests(json.dumps(keys))):
        by_rank = hvd.allgather_object(keys, name="horovod_jobs.metric_keys")
        raise RuntimeError(f"ranks log different metrics, cannot average them: {dict(enumerate(by_rank))}")
    values = tf.constant([float(logs[key]) for key in keys], dtype=tf.float64)
    for key, mean in zip(keys, hvd.allreduce(values, op=hvd.Average, name="horovod_jobs.logs").numpy()):
        logs[key] = float(mean)


class AverageModelAtEpochEnd(keras.callbacks.Callback):
    """For ``sync="average"``: at each epoch end, set every floating-point model variable
    (trainable ones and statistics such as BatchNorm's moving means; not integer states such as
    random-seed counters) to its mean over the ranks. Put it before callbacks that evaluate or
    save the model at epoch end."""

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        average_variables(v for v in self.model.variables if tf.as_dtype(v.dtype).is_floating)


class ProgressWatchdog(keras.callbacks.Callback):
    """End the process (``os._exit(1)``, with a message on stderr) when no training or
    evaluation batch ends for ``seconds`` during ``fit``.

    This bounds the one failure Horovod does not bound under Gloo: a peer that is alive but never
    submits its tensors (stuck in its own code, or off by a step). Horovod's stall shutdown
    (``HOROVOD_STALL_SHUTDOWN_TIME_SECONDS``) works under MPI, but under Gloo it never fired in
    our tests (Horovod 0.28.1), and Gloo's own timeout does not apply while the peer's Horovod
    thread still answers. The waiting ranks then exit here, and ``horovodrun`` ends the rest.
    ``seconds`` must exceed the slowest step (the first one traces the model) and the longest
    epoch-end work (e.g. a validation callback that transcribes a data set).
    """

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self._last = time.monotonic()
        self._stop = threading.Event()

    def _watch(self, stop: threading.Event) -> None:
        while not stop.wait(min(1.0, self.seconds / 4)):
            idle = time.monotonic() - self._last
            if idle > self.seconds:
                print(f"ProgressWatchdog: no batch finished for {idle:.0f} s (limit {self.seconds:g} s): "
                      "a peer is stuck or gone; exiting", file=sys.stderr, flush=True)
                os._exit(1)

    def _progress(self, *args, **kwargs) -> None:
        self._last = time.monotonic()

    def on_train_begin(self, logs: dict | None = None) -> None:
        self._progress()
        self._stop = threading.Event()  # one per fit: a previous fit's thread keeps its own, set
        threading.Thread(target=self._watch, args=(self._stop,), name="progress-watchdog", daemon=True).start()

    def on_train_end(self, logs: dict | None = None) -> None:
        self._stop.set()

    on_train_batch_end = on_test_batch_end = on_epoch_begin = on_epoch_end = _progress


def agreed_batch_count(local_count: int) -> int:
    """The largest ``local_count`` over the ranks: the number of batches every rank makes of its
    shard (with :func:`tfnhr.data.batches.split_into_batches`, which raises on a rank with
    fewer examples than that) so that all take the same number of synchronous steps, each batch
    within the pixel budget that gave the ranks' counts."""
    return int(hvd.allreduce(tf.constant(local_count, dtype=tf.int64), op=hvd.Max,
                             name="horovod_jobs.batch_count").numpy())


def scale_learning_rate(lr: float, size: int, warmup_steps: int = 0
                        ) -> float | keras.optimizers.schedules.LearningRateSchedule:
    """``lr * size`` (with ``sync="gradients"`` a step sees ``size`` times the examples), reached
    by linear warm-up from ``lr`` over the first ``warmup_steps`` optimizer steps if
    ``warmup_steps > 0``. (Model averaging takes local steps on local batches: keep ``lr``.)

    The warm-up is Keras' own ``PolynomialDecay(lr, warmup_steps, lr * size, power=1)`` (a
    "decay" upwards: linear from ``lr`` at step 0 to ``lr * size`` at ``warmup_steps``, constant
    after), so models saved with it load in any process without this module.
    """
    if size < 1 or warmup_steps < 0:
        raise ValueError(f"need size >= 1 and warmup_steps >= 0, got {size} and {warmup_steps}")
    if warmup_steps == 0:
        return float(lr * size)
    return keras.optimizers.schedules.PolynomialDecay(lr, warmup_steps, end_learning_rate=lr * size, power=1.0)


def root_only(callbacks: Iterable[keras.callbacks.Callback], workers: Workers) -> list[keras.callbacks.Callback]:
    """``callbacks`` on rank 0, none elsewhere: for those that write files or print (checkpoints,
    CSV logs, TensorBoard, progress bars)."""
    return list(callbacks) if workers.is_root else []
