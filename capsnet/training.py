"""Training a CapsNet (Sabour et al. 2017) or a Multi-Lane CapsNet (Rosario et al. 2019) whose lanes
are placed on devices: what ``capsnet train`` runs, usable from a notebook::

    from capsnet.training import TrainConfig, train
    summary = train(TrainConfig(model="mlcn", dataset="synthetic", epochs=1, out="runs/mlcn"))

:class:`TrainConfig` holds the options (its fields are ``capsnet train``'s flags with
underscores), :func:`prepare` turns them into data, devices, a placement and a compiled model
(:class:`Setup`), :func:`train` fits and writes the outputs. :class:`TrainingHooks` are where a
caller changes how it runs (``horovod_jobs`` trains on several workers with them).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import keras
import tensorflow as tf

from capsnet.data import ClassificationData, load_dataset, to_dataset
from capsnet.devices import canonical_device, parse_devices, prepare_devices
from capsnet.lanes import Lane, lane_list
from capsnet.models import CapsuleClassifier, build_capsnet, build_mlcn, load_model
from capsnet.placement import format_placement_table, lane_costs, place, placement_to_json, probe_device_speed, speed_map
from capsnet.state import restore_training_state, training_state


MODELS = ("capsnet", "mlcn")
"""``TrainConfig.model``: Sabour et al.'s CapsNet, or the Multi-Lane CapsNet."""


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The options of a CapsNet/MLCN training run (``capsnet train``'s flags, same defaults).

    Model: ``model`` ``"capsnet"`` or ``"mlcn"``; MLCN lanes: ``lanes`` equal lanes of ``width``
    (16·width filters per conv stage) and ``depth`` (conv stages), or ``lane_spec`` (one
    ``WIDTHxDEPTH`` per lane, e.g. ``"4x1,2x3"``); ``lane_dropout``; ``routings`` (dynamic-routing
    iterations). Data: ``dataset`` (:data:`capsnet.data.DATASET_NAMES`), ``data_dir``,
    ``limit_train``/``limit_test``. Training: ``epochs``, ``batch_size``, Adam's ``lr`` decayed by
    ``lr_decay`` per epoch, ``seed``, ``threads`` (0: TensorFlow's default), ``out`` (folder),
    ``resume`` (continue the run in ``out``: :func:`resume_point`).
    Placement: ``devices`` (``"gpu:0,gpu:1"`` or a list; ``None``: no pinning), ``placement``
    (:data:`capsnet.placement.STRATEGIES`), ``main_device`` (default: the first device), ``cost``
    (:data:`capsnet.placement.COST_MODELS`), ``speeds`` (``"auto"``, ``"equal"`` or ``"1,3.1"``).
    """

    model: str = "mlcn"
    lanes: int = 8
    width: int = 4
    depth: int = 1
    lane_spec: str | None = None
    lane_dropout: float = 0.0
    routings: int = 3
    dataset: str = "fashion_mnist"
    data_dir: Path | None = None
    limit_train: int | None = None
    limit_test: int | None = None
    epochs: int = 10
    batch_size: int = 100
    lr: float = 1e-3
    lr_decay: float = 0.9
    seed: int = 0
    threads: int = 0
    out: Path = Path("runs/capsnet")
    resume: bool = False
    devices: str | Sequence[str] | None = None
    placement: str = "greedy"
    main_device: str | None = None
    cost: str = "model"
    speeds: str = "auto"

    def lane_list(self) -> list[Lane]:
        """The MLCN lanes: ``lane_spec``'s, else ``lanes`` equal ones; ``ValueError`` for a bad spec."""
        return lane_list(self.lane_spec, self.lanes, self.width, self.depth)


@dataclasses.dataclass
class Setup:
    """Everything ``capsnet train`` resolved from its arguments before training."""

    data: ClassificationData
    model: CapsuleClassifier | None
    devices: list[str]
    main_device: str | None
    lanes: list[Lane] | None
    placement: dict[int, str] | None
    speeds: dict[str, float] | None
    costs: list[float] | None
    placement_table: str | None = None
    """What :func:`train` prints about where the lanes run (``None``: nothing placed)."""
    placement_record: dict | None = None
    """The placement as JSON-able data: ``summary.json``'s ``placement`` and ``placement.json``."""
    first_epoch: int = 0
    """The epoch (from 0) that training starts with: the epochs done before a ``--resume``."""


def resume_point(out: Path, epochs: int) -> int:
    """The epochs already done in run folder ``out`` (the rows of its ``log.csv``), to continue
    from its ``model.keras``; ``ValueError`` if either is missing, or if ``epochs`` are done."""
    missing = [name for name in ("model.keras", "log.csv") if not (Path(out) / name).is_file()]
    if missing:
        raise ValueError(f"--resume: {out} has no {' or '.join(missing)} (a finished capsnet train run's folder)")
    with open(Path(out) / "log.csv", newline="") as log:
        done = sum(1 for _ in csv.DictReader(log))
    if done >= epochs:
        raise ValueError(f"--resume: {out} already holds {done} epochs; --epochs {epochs} asks for no more "
                         f"(give the total, e.g. --epochs {done + 1})")
    return done


def saved_state(out: Path) -> dict:
    """The training state (weights, optimizer state) of ``out/model.keras`` by name
    (:func:`capsnet.state.training_state`)."""
    return training_state(load_model(Path(out) / "model.keras"))


def prepare(config: TrainConfig, build_model: bool = True) -> Setup:
    """Check the configuration, make the devices (before TensorFlow's first op), load the data,
    place the lanes and build the compiled model. ``build_model=False``: stop after the data
    (``Setup.model`` and the placement are ``None``), for a caller that places and builds the
    model itself (``horovod_jobs.model_parallel``). Raises ValueError, FileNotFoundError
    (Fashion-MNIST missing) or RuntimeError (a download that failed) with a message for the user;
    placement warnings (idle devices) are Python warnings."""
    if config.model not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}, got {config.model!r}")
    lanes = config.lane_list() if config.model == "mlcn" else None
    devices = parse_devices(config.devices) if config.devices is not None else []
    if config.model == "capsnet" and len(devices) > 1:
        raise ValueError(f"--devices: CapsNet has no lanes to place, so it takes at most one device "
                         f"(its main device), got {len(devices)}: {', '.join(devices)}")
    main_device = canonical_device(config.main_device) if config.main_device else (devices[0] if devices else None)
    if config.threads < 0:
        raise ValueError(f"--threads must be 0 (TensorFlow's default) or positive, got {config.threads}")
    if config.threads:
        tf.config.threading.set_intra_op_parallelism_threads(config.threads)
        tf.config.threading.set_inter_op_parallelism_threads(config.threads)
    first_epoch = resume_point(config.out, config.epochs) if config.resume else 0
    if main_device:
        prepare_devices(list(dict.fromkeys([*devices, main_device])))
    data = load_dataset(config.dataset, config.data_dir, config.limit_train, config.limit_test)
    if not build_model:
        return Setup(data, None, devices, main_device, lanes, None, None, None, first_epoch=first_epoch)
    placement = speeds = costs = None
    if lanes and devices:
        if config.speeds == "auto" and len(devices) > 1:
            speeds = probe_device_speed(devices)
        else:
            speeds = speed_map("equal" if config.speeds == "auto" else config.speeds, devices)
        costs = lane_costs(config.cost, lanes, input_shape=data.image_shape, n_class=data.num_classes,
                           device=main_device, batch_size=config.batch_size)
        placement = place(lanes, devices, config.placement, speeds, costs, config.seed)
    keras.utils.set_random_seed(config.seed)
    if lanes:
        model = build_mlcn(data.image_shape, data.num_classes, lanes, config.lane_dropout, config.routings,
                           placement, main_device=main_device)
    else:
        model = build_capsnet(data.image_shape, data.num_classes, config.routings, main_device=main_device)
    model.compile(optimizer=keras.optimizers.Adam(config.lr))
    if config.resume:
        restore_training_state(model, saved_state(config.out))
    if placement:
        return Setup(data, model, devices, main_device, lanes, placement, speeds, costs,
                     format_placement_table(lanes, placement, speeds, costs),
                     json.loads(placement_to_json(placement)), first_epoch)
    return Setup(data, model, devices, main_device, lanes, placement, speeds, costs, first_epoch=first_epoch)


class TrainingHooks:
    """Where :func:`train` asks its caller; this base class trains in one process (``capsnet train``).

    ``writes``: whether this process writes ``--out`` (model, placement, log, summary).
    """

    writes = True

    def datasets(self, data: ClassificationData, batch_size: int, seed: int, first_epoch: int = 0
                 ) -> tuple[tf.data.Dataset, tf.data.Dataset]:
        """The training batches (reshuffled every epoch from ``seed``; a resumed run's epochs draw
        the orders of a run's first epochs again) and the test batches."""
        return (to_dataset(data.x_train, data.y_train, batch_size, shuffle=True, seed=seed),
                to_dataset(data.x_test, data.y_test, batch_size))

    def callbacks(self, callbacks: list[keras.callbacks.Callback]) -> list[keras.callbacks.Callback]:
        """``fit``'s callback list, given :func:`train`'s own."""
        return callbacks

    def model_to_save(self, model: CapsuleClassifier) -> CapsuleClassifier:
        """The model that ``model.keras`` holds, asked on every process after training."""
        return model


def train(config: TrainConfig, setup: Setup | None = None, hooks: TrainingHooks | None = None) -> dict:
    """Fit the model on the training split (the test split evaluated after each epoch), write
    model.keras, placement.json, log.csv and summary.json into ``config.out`` (if
    ``hooks.writes``); returns the summary. ``setup``: what :func:`prepare` made of ``config``
    (prepared here if not given)."""
    setup = setup or prepare(config)
    hooks = hooks or TrainingHooks()
    data, model = setup.data, setup.model
    if setup.placement_table:
        print(setup.placement_table)
    elif setup.lanes:
        print("lanes not pinned (no --devices): TensorFlow places them")
    print(f"{config.model}: {model.parameter_count():,} parameters, main device: "
          f"{setup.main_device or 'TensorFlow default'}; {data.name}: {len(data.x_train)} training, "
          f"{len(data.x_test)} test examples")
    if hooks.writes:
        Path(config.out).mkdir(parents=True, exist_ok=True)
    timer = EpochTimer()
    train_data, test_data = hooks.datasets(data, config.batch_size, config.seed, setup.first_epoch)
    if setup.first_epoch:
        print(f"resuming {config.out} after epoch {setup.first_epoch}")
    history = model.fit(
        train_data,
        validation_data=test_data,
        initial_epoch=setup.first_epoch,
        epochs=config.epochs,
        shuffle=False,  # the datasets shuffle (per --seed)
        verbose=1 if sys.stdout.isatty() else 2,
        callbacks=hooks.callbacks([
            keras.callbacks.ProgbarLogger(),  # first, so that Keras's epoch line precedes the timer's
            keras.callbacks.LearningRateScheduler(lambda epoch, _: config.lr * config.lr_decay**epoch),
            timer,
            *([keras.callbacks.CSVLogger(str(Path(config.out) / "log.csv"), append=bool(setup.first_epoch))]
              if hooks.writes else []),
        ]),
    )
    summary = {
        "model": config.model,
        "lanes": [str(lane) for lane in setup.lanes] if setup.lanes else None,
        "params": model.parameter_count(),
        "devices": setup.devices,
        "main_device": setup.main_device,
        "placement_strategy": config.placement if setup.placement_record else None,
        "placement": setup.placement_record,
        "speeds": setup.speeds,
        "cost": config.cost if setup.costs else None,
        "costs": setup.costs,
        "dataset": data.name,
        "train_examples": len(data.x_train),
        "test_examples": len(data.x_test),
        "epochs": config.epochs,
        "resumed_after_epoch": setup.first_epoch or None,
        "batch_size": config.batch_size,
        "learning_rate": config.lr,
        "lr_decay": config.lr_decay,
        "seed": config.seed,
        "epoch_seconds": timer.seconds,
        "test_accuracy": history.history["val_accuracy"][-1],
        "test_loss": history.history["val_loss"][-1],
    }
    saved = hooks.model_to_save(model)
    if hooks.writes:
        write_outputs(Path(config.out), saved, setup.placement_record, summary)
    print(f"test accuracy: {summary['test_accuracy']:.4f}")
    return summary


def write_outputs(out: Path, model: CapsuleClassifier, placement: dict | None, summary: dict) -> None:
    """Write model.keras, placement.json (if the lanes were placed), summary.json (log.csv is the
    CSVLogger's) into ``out`` and say so."""
    written = ["model.keras", "log.csv", "summary.json"]
    model.save(out / "model.keras")
    if placement:
        (out / "placement.json").write_text(json.dumps(placement) + "\n")
        written.insert(1, "placement.json")
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"wrote {', '.join(written)} in {out}")


class EpochTimer(keras.callbacks.Callback):
    """Each epoch's wall seconds (training and test pass): kept in ``seconds``, added to the logs
    as ``epoch_seconds`` (for a ``CSVLogger`` after it) and printed with the test accuracy
    (``val_accuracy``: ``fit`` needs validation data)."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds: list[float] = []
        self._start = 0.0

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.seconds.append(time.perf_counter() - self._start)
        logs["epoch_seconds"] = self.seconds[-1]
        print(f"epoch {epoch + 1}: {self.seconds[-1]:.1f} s, test accuracy {logs['val_accuracy']:.4f}", flush=True)
