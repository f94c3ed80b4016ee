"""What ``horovod_jobs/train.py`` changes in the single-process trainings to run on every worker.

``tfnhr.training.train`` and ``capsnet.training.train`` take hooks (their ``TrainingHooks``);
the ones here make them data parallel over Horovod's ranks (:mod:`horovod_jobs.distributed`):

* the optimizer is wrapped by ``distributed_optimizer`` (gradients averaged, or model averaging
  every K steps); ``fit`` starts with :class:`~horovod_jobs.distributed.AverageMetrics` (first:
  every later callback reads averaged logs, so LR halving and the summaries agree on all ranks),
  ``BroadcastInitialState``, ``AverageModelAtEpochEnd`` (model averaging), an optional
  :class:`LearningRateWarmUp` and a ``ProgressWatchdog``; only rank 0 writes files.
* recognizer (``--task nhr``): each epoch each rank trains on its shard of
  ``shard_by_pixels(pixels, size, seed, epoch)`` (nearly equal pixel totals, every example once),
  split by ``similar_width_batches`` into ``steps_per_epoch`` batches (:mod:`tfnhr.data.batches`), the same count on every
  rank; the validation set is sharded too and the ranks' edit distances and reference lengths
  are summed (:class:`ShardedErrorRates`), so every rank gets exactly the CER/WER one process
  scoring the whole set would; the time limit is agreed (:class:`AgreedTimeLimit`).
* CapsNet/MLCN (``--task mlcn``): each epoch each rank trains on its own slice of a fresh
  permutation of the training set (:func:`worker_batches`, equal slices so equal step counts)
  and evaluates its slice of the test set; ``AverageMetrics`` averages the test accuracy.
* MLCN model parallel (``--task mlcn --parallel model``, :class:`ModelParallelHooks`): the same
  with each replica of :mod:`horovod_jobs.model_parallel` in place of a worker.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
from collections.abc import Sequence

import horovod.tensorflow as hvd
import keras
import numpy as np
import tensorflow as tf

from capsnet import training as capsnet_training
from capsnet.data import ClassificationData, to_dataset
from horovod_jobs.distributed import (AverageMetrics, AverageModelAtEpochEnd, BroadcastInitialState,
                                      ProgressWatchdog, Workers, check_same_config, distributed_optimizer)
from horovod_jobs.model_parallel import BroadcastReplicated, RankGroups, gather_full_model
from tfnhr import training as tfnhr_training
from tfnhr.charset import Charset
from tfnhr.data.batches import shard_by_pixels, similar_width_batches, steps_per_epoch
from tfnhr.data.dataset import Augment, batched_dataset
from tfnhr.data.samples import TextImageSet
from tfnhr.training.callbacks import TimeLimit, ValidationErrorRates


@dataclasses.dataclass(frozen=True)
class SyncOptions:
    """How the workers keep in step: ``sync`` and ``average_every`` as in
    :func:`~horovod_jobs.distributed.distributed_optimizer`; ``warmup_steps`` (0: none) batches of
    :class:`LearningRateWarmUp` from ``1 / size`` of the learning rate; ``watchdog_seconds`` (0:
    none) for :class:`~horovod_jobs.distributed.ProgressWatchdog`."""

    sync: str
    average_every: int
    warmup_steps: int
    watchdog_seconds: float


class LearningRateWarmUp(keras.callbacks.Callback):
    """For the first ``steps`` training batches of ``fit``, scale the optimizer's learning rate by
    a factor rising linearly from ``start`` (first batch) to 1 (batch ``steps + 1`` on): the
    warm-up towards a learning rate scaled by the world size (``start = 1 / size``).

    Between epochs the optimizer holds the unscaled rate (restored at each epoch end, before any
    later callback reads it): epoch schedules (``LearningRateScheduler``) and
    ``LearningRateHalving`` set or halve that rate as without warm-up, and logs and checkpoints
    show it. (Keras' own warm-up, a ``LearningRateSchedule`` such as
    :func:`~horovod_jobs.distributed.scale_learning_rate` returns, cannot be halved or set by
    those callbacks: Keras raises ``TypeError``.)
    """

    def __init__(self, steps: int, start: float) -> None:
        super().__init__()
        if steps < 1 or not 0 < start <= 1:
            raise ValueError(f"need steps >= 1 and 0 < start <= 1, got {steps} and {start}")
        self.steps, self.start = steps, start
        self.batches = 0  # warm-up batches begun
        self.rate: float | None = None  # the unscaled rate, while an epoch warms up

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        if self.batches > self.steps:
            return
        optimizer = self.model.optimizer
        if self.rate is None:
            self.rate = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
        optimizer.learning_rate = self.rate * (self.start + (1 - self.start) * min(self.batches / self.steps, 1.0))
        self.batches += 1

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self.rate is not None:
            self.model.optimizer.learning_rate = self.rate
            self.rate = None


class AgreedTimeLimit(TimeLimit):
    """A :class:`~tfnhr.training.callbacks.TimeLimit` decided together: after every epoch, training stops
    on all ranks if any rank's clock passed the limit (one allreduce of the flag), so no rank
    goes on alone into a step that the others never join; :meth:`elapsed` (the annealing's
    clock) is the same on every rank."""

    def elapsed(self) -> float:
        """The longest time any rank has trained (one allreduce): every rank sees the same."""
        seconds = tf.constant(super().elapsed(), tf.float64)
        return float(hvd.allreduce(seconds, op=hvd.Max, name="horovod_jobs.elapsed"))

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        super().on_epoch_end(epoch, logs)
        if math.isinf(self.seconds):  # no limit (the same on every rank)
            return
        passed = hvd.allreduce(tf.constant(int(self.stopped_early), tf.int32), op=hvd.Max,
                               name="horovod_jobs.time_limit")
        if int(passed):
            self.model.stop_training = self.stopped_early = True


class ShardedErrorRates(ValidationErrorRates):
    """:class:`~tfnhr.training.callbacks.ValidationErrorRates` over this rank's shard of the
    validation set: the ranks' error and length counts are summed (one allreduce), so ``val_cer``
    and ``val_wer`` are those of the whole set, identical on every rank."""

    def error_counts(self) -> list[float]:
        counts = tf.constant(super().error_counts(), tf.float64)
        return hvd.allreduce(counts, op=hvd.Sum, name="horovod_jobs.val_errors").numpy().tolist()


def worker_batches(x: np.ndarray, y: np.ndarray, batch_size: int, seed: int, workers: Workers,
                   first_epoch: int = 0) -> tf.data.Dataset:
    """This worker's ``(images, labels)`` batches: epoch ``e`` (from ``first_epoch`` on, so that a
    resumed run continues the sequence) permutes all examples by ``(seed, e)`` and gives worker
    ``r`` positions ``[r·n, (r+1)·n)``, ``n = len(x) // size`` (disjoint slices of equal length,
    so every worker takes ``ceil(n / batch_size)`` steps; the ``len(x) % size`` examples left over
    differ from epoch to epoch)."""
    share = len(x) // workers.size
    if share == 0:
        raise ValueError(f"{len(x)} training examples cannot feed {workers.size} workers")
    epoch = [first_epoch]

    def batches():
        order = np.random.default_rng([seed, epoch[0]]).permutation(len(x))[workers.rank * share:][:share]
        epoch[0] += 1
        for start in range(0, share, batch_size):
            chosen = order[start:start + batch_size]
            yield x[chosen], y[chosen]

    dataset = tf.data.Dataset.from_generator(batches, output_signature=(
        tf.TensorSpec((None, *x.shape[1:]), tf.float32), tf.TensorSpec((None,), tf.int32)))
    return dataset.apply(tf.data.experimental.assert_cardinality(-(-share // batch_size))).prefetch(tf.data.AUTOTUNE)


def data_digest(data: ClassificationData) -> str:
    """sha256 of a classification data set's arrays, to compare the ranks' copies."""
    digest = hashlib.sha256()
    for array in (data.x_train, data.y_train, data.x_test, data.y_test):
        digest.update(str(array.shape).encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


class WorkerHooks:
    """What both tasks share: rank 0 writes; the optimizer and callbacks that synchronise;
    ``extra`` callbacks (e.g. a benchmark's timer) go last."""

    def __init__(self, workers: Workers, options: SyncOptions,
                 extra: Sequence[keras.callbacks.Callback] = ()) -> None:
        self.workers, self.options, self.extra = workers, options, list(extra)

    @property
    def writes(self) -> bool:
        return self.workers.is_root

    def distribute(self, model: keras.Model) -> None:
        """Recompile ``model`` with its optimizer (and its state, if built) made distributed; no
        XLA (Horovod's ops are not XLA ops)."""
        optimizer = distributed_optimizer(model.optimizer, self.options.sync, self.options.average_every)
        model.compile(optimizer=optimizer, jit_compile=False)

    @property
    def replicas(self) -> int:
        """How many model replicas train on different batches (each step sees this many batches)."""
        return self.workers.size

    def initial_state(self) -> keras.callbacks.Callback:
        """The callback that makes every rank start from the same weights."""
        return BroadcastInitialState()

    def callbacks(self, callbacks: list[keras.callbacks.Callback]) -> list[keras.callbacks.Callback]:
        first = [AverageMetrics(), self.initial_state()]
        if self.options.sync == "average":
            first.append(AverageModelAtEpochEnd())
        if self.options.warmup_steps:
            first.append(LearningRateWarmUp(self.options.warmup_steps, 1 / self.replicas))
        if self.options.watchdog_seconds:
            first.append(ProgressWatchdog(self.options.watchdog_seconds))
        return [*first, *callbacks, *self.extra]


class RecognizerHooks(WorkerHooks, tfnhr_training.TrainingHooks):
    """``tfnhr.training.train`` on every worker (see the module docstring)."""

    def prepare_model(self, model: keras.Model) -> None:
        self.distribute(model)

    def train_data(self, data: TextImageSet, charset: Charset, options: tfnhr_training.TrainOptions,
                   first_epoch: int, augment: Augment | None = None) -> tf.data.Dataset:
        pixels = data.pixels()
        check_same_config({"ids": data.ids, "texts": data.texts, "pixels": pixels.tolist()}, what="training data")
        steps = steps_per_epoch(pixels, options.batch_pixels, self.workers.size)
        rank, size = self.workers.rank, self.workers.size
        widths = [image.shape[1] for image in data.images]

        def epoch_batches(epoch: int) -> list[list[int]]:
            shard = shard_by_pixels(pixels, size, options.seed, epoch)[rank]
            # The batches are shuffled alike on every rank, so that step k's batches come from the same
            # width quantile of each shard: a synchronous step lasts as long as its widest batch.
            return similar_width_batches(pixels, widths, shard, steps, options.sort_window, [options.seed, epoch])

        epoch_batches(first_epoch)  # a shard too small for the steps fails here, not inside fit
        return batched_dataset(data, charset, epoch_batches, first_epoch, steps, augment=augment)

    def validation(self, data: TextImageSet, options: tfnhr_training.TrainOptions) -> keras.callbacks.Callback:
        shard = data.subset(shard_by_pixels(data.pixels(), self.workers.size, options.seed, 0)[self.workers.rank])
        return ShardedErrorRates(shard, options.batch_pixels)

    def time_limit(self, seconds: float) -> TimeLimit:
        return AgreedTimeLimit(seconds)

    def threads(self) -> int:
        """This worker's share of the cores: ``cores // workers on this host`` (at least 1)."""
        return max(1, len(os.sched_getaffinity(0)) // self.workers.local_size)


class ClassifierHooks(WorkerHooks, capsnet_training.TrainingHooks):
    """``capsnet.training.train`` on every worker (see the module docstring)."""

    @property
    def data_share(self) -> Workers:
        """Which share of the data this rank trains and tests on: rank of size."""
        return self.workers

    def datasets(self, data: ClassificationData, batch_size: int, seed: int, first_epoch: int = 0
                 ) -> tuple[tf.data.Dataset, tf.data.Dataset]:
        share = self.data_share
        test = np.array_split(np.arange(len(data.x_test)), share.size)[share.rank]
        if not len(test):
            raise ValueError(f"{len(data.x_test)} test examples cannot be shared by {share.size} workers")
        return (worker_batches(data.x_train, data.y_train, batch_size, seed, share, first_epoch),
                to_dataset(data.x_test[test], data.y_test[test], batch_size))


class ModelParallelHooks(ClassifierHooks):
    """``capsnet.training.train`` of a :class:`~horovod_jobs.model_parallel.LaneShard` on every
    rank: the ranks of a replica train and test on the same batches (replica ``g`` of ``G`` takes
    share ``g`` as a worker of a ``G``-worker data-parallel job would); the shard averages its own
    gradients (no distributed optimizer); replicated weights start from rank 0's; ``model.keras``
    is the whole MLCN, gathered on rank 0."""

    def __init__(self, workers: Workers, options: SyncOptions, layout: RankGroups,
                 extra: Sequence[keras.callbacks.Callback] = ()) -> None:
        super().__init__(workers, options, extra)
        self.layout = layout

    @property
    def replicas(self) -> int:
        return self.layout.groups

    @property
    def data_share(self) -> Workers:
        return Workers(self.layout.group, self.layout.groups, 0, 1)

    def initial_state(self) -> keras.callbacks.Callback:
        return BroadcastReplicated()

    def model_to_save(self, model: keras.Model) -> keras.Model | None:
        return gather_full_model(model, self.layout)
