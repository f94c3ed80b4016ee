"""``capsnet train``: train a CapsNet or a Multi-Lane CapsNet (lanes placed on devices) and save it."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import keras
import tensorflow as tf

from capsnet.commands.common import (
    add_cost_argument,
    add_lane_arguments,
    lane_costs,
    lanes_from_args,
    place_lanes,
    positive_int,
    report_error,
    speed_map,
)
from capsnet.data import DATASET_NAMES, ClassificationData, load_dataset, to_dataset
from capsnet.devices import canonical_device, parse_devices, prepare_devices
from capsnet.lanes import Lane
from capsnet.models import CapsuleClassifier, build_capsnet, build_mlcn
from capsnet.placement import STRATEGIES, format_placement_table, placement_to_json, probe_device_speed


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``train`` to the ``capsnet`` sub-commands."""
    parser = commands.add_parser(
        "train", help="train a CapsNet or MLCN (margin + reconstruction loss, Adam, exponential LR decay)",
        description="Train a CapsNet or a Multi-Lane CapsNet (MLCN) whose lanes are placed on --devices. "
                    "As the public CapsNet code does, the model is evaluated on the test split after every "
                    "epoch (there is no separate validation split). Prints the placement table, one line "
                    "per epoch (its wall seconds, training and test pass, and the test accuracy) and the "
                    "final test accuracy; writes model.keras, placement.json (MLCN with --devices), "
                    "log.csv and summary.json into --out.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_train_arguments(parser)
    parser.set_defaults(run=run)


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``capsnet train`` (model, lanes, data, training, devices and placement; read
    by :func:`prepare` and :func:`train`), also offered by ``horovod_jobs/train.py --task mlcn``."""
    parser.add_argument("--model", choices=("capsnet", "mlcn"), default="mlcn",
                        help="capsnet = Sabour et al.'s CapsNet; mlcn = Multi-Lane CapsNet")
    add_lane_arguments(parser)
    parser.add_argument("--lane-dropout", type=float, default=0.0, help="MLCN: rate of dropping whole lanes")
    parser.add_argument("--routings", type=positive_int, default=3, help="dynamic-routing iterations")
    data = parser.add_argument_group("data")
    data.add_argument("--dataset", choices=DATASET_NAMES, default="fashion_mnist", help="data set")
    data.add_argument("--data-dir", type=Path, default=None,
                      help="folder searched first for Fashion-MNIST's IDX files (see capsnet.data)")
    data.add_argument("--limit-train", type=positive_int, default=None, help="use the first N training examples")
    data.add_argument("--limit-test", type=positive_int, default=None, help="use the first N test examples")
    training = parser.add_argument_group("training")
    training.add_argument("--epochs", type=positive_int, default=10, help="epochs")
    training.add_argument("--batch-size", type=positive_int, default=100, help="examples per batch")
    training.add_argument("--lr", type=float, default=1e-3, help="Adam's initial learning rate")
    training.add_argument("--lr-decay", type=float, default=0.9,
                          help="learning rate of epoch e (from 0) = lr · lr_decay^e")
    training.add_argument("--seed", type=int, default=0,
                          help="seed of the weights, the shuffling and the random placement")
    training.add_argument("--threads", type=int, default=0,
                          help="TensorFlow intra- and inter-op threads (0: TensorFlow's default)")
    training.add_argument("--out", type=Path, default=Path("runs/capsnet"), help="output folder")
    placement = parser.add_argument_group("devices and placement")
    placement.add_argument("--devices", default=None,
                           help="comma-separated devices for the lanes, e.g. gpu:0,gpu:1 or cpu:0,cpu:1 "
                                "(cpu:K beyond the present CPUs become logical CPUs); default: no pinning, "
                                "TensorFlow places everything; CapsNet takes at most one")
    placement.add_argument("--placement", choices=STRATEGIES, default="greedy", help="lane placement strategy")
    placement.add_argument("--main-device", default=None,
                           help="device of the capsule assembly, decoder and losses (default: the first of "
                                "--devices)")
    add_cost_argument(placement)
    placement.add_argument("--speeds", default="auto",
                           help="device speed factors: auto (capsnet.placement.probe_device_speed when there "
                                "is more than one device, else equal), equal (all 1.0) or one per device, "
                                "e.g. 1,3.1")


@dataclasses.dataclass
class Setup:
    """Everything ``capsnet train`` resolved from its arguments before training."""

    data: ClassificationData
    model: CapsuleClassifier
    devices: list[str]
    main_device: str | None
    lanes: list[Lane] | None
    placement: dict[int, str] | None
    speeds: dict[str, float] | None
    costs: list[float] | None


def run(args: argparse.Namespace) -> int:
    """Set up, train, save; returns the exit status (2 with a one-line reason for bad input)."""
    try:
        setup = prepare(args)
    except (ValueError, FileNotFoundError, RuntimeError) as error:
        return report_error(args, error)
    train(args, setup)
    return 0


def prepare(args: argparse.Namespace) -> Setup:
    """Check the arguments, make the devices (before TensorFlow's first op), load the data, place
    the lanes and build the compiled model. Raises ValueError, FileNotFoundError (Fashion-MNIST
    missing) or RuntimeError (a download that failed) with a message for the user."""
    lanes = lanes_from_args(args) if args.model == "mlcn" else None
    devices = parse_devices(args.devices) if args.devices is not None else []
    if args.model == "capsnet" and len(devices) > 1:
        raise ValueError(f"--devices: CapsNet has no lanes to place, so it takes at most one device "
                         f"(its main device), got {len(devices)}: {', '.join(devices)}")
    main_device = canonical_device(args.main_device) if args.main_device else (devices[0] if devices else None)
    if args.threads < 0:
        raise ValueError(f"--threads must be 0 (TensorFlow's default) or positive, got {args.threads}")
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    if main_device:
        prepare_devices(list(dict.fromkeys([*devices, main_device])))
    data = load_dataset(args.dataset, args.data_dir, args.limit_train, args.limit_test)
    placement = speeds = costs = None
    if lanes and devices:
        if args.speeds == "auto" and len(devices) > 1:
            speeds = probe_device_speed(devices)
        else:
            speeds = speed_map("equal" if args.speeds == "auto" else args.speeds, devices)
        costs = lane_costs(args.cost, lanes, input_shape=data.image_shape, n_class=data.num_classes,
                           device=main_device, batch_size=args.batch_size)
        placement = place_lanes("train", lanes, devices, args.placement, speeds, costs, args.seed)
    keras.utils.set_random_seed(args.seed)
    if lanes:
        model = build_mlcn(data.image_shape, data.num_classes, lanes, args.lane_dropout, args.routings,
                           placement, main_device=main_device)
    else:
        model = build_capsnet(data.image_shape, data.num_classes, args.routings, main_device=main_device)
    model.compile(optimizer=keras.optimizers.Adam(args.lr))
    return Setup(data, model, devices, main_device, lanes, placement, speeds, costs)


class TrainingHooks:
    """Where :func:`train` asks its caller; this base class trains in one process (``capsnet train``).

    ``writes``: whether this process writes ``--out`` (model, placement, log, summary).
    """

    writes = True

    def datasets(self, data: ClassificationData, batch_size: int, seed: int
                 ) -> tuple[tf.data.Dataset, tf.data.Dataset]:
        """The training batches (reshuffled every epoch from ``seed``) and the test batches."""
        return (to_dataset(data.x_train, data.y_train, batch_size, shuffle=True, seed=seed),
                to_dataset(data.x_test, data.y_test, batch_size))

    def callbacks(self, callbacks: list[keras.callbacks.Callback]) -> list[keras.callbacks.Callback]:
        """``fit``'s callback list, given :func:`train`'s own."""
        return callbacks


def train(args: argparse.Namespace, setup: Setup, hooks: TrainingHooks | None = None) -> dict:
    """Fit ``setup.model`` on the training split (the test split evaluated after each epoch), write
    model.keras, placement.json, log.csv and summary.json into ``args.out`` (if ``hooks.writes``);
    returns the summary."""
    hooks = hooks or TrainingHooks()
    data, model = setup.data, setup.model
    if setup.placement:
        print(format_placement_table(setup.lanes, setup.placement, setup.speeds, setup.costs))
    elif setup.lanes:
        print("lanes not pinned (no --devices): TensorFlow places them")
    print(f"{args.model}: {model.count_params():,} parameters, main device: "
          f"{setup.main_device or 'TensorFlow default'}; {data.name}: {len(data.x_train)} training, "
          f"{len(data.x_test)} test examples")
    if hooks.writes:
        args.out.mkdir(parents=True, exist_ok=True)
    timer = EpochTimer()
    train_data, test_data = hooks.datasets(data, args.batch_size, args.seed)
    history = model.fit(
        train_data,
        validation_data=test_data,
        epochs=args.epochs,
        shuffle=False,  # the datasets shuffle (per --seed)
        verbose=1 if sys.stdout.isatty() else 2,
        callbacks=hooks.callbacks([
            keras.callbacks.ProgbarLogger(),  # first, so that Keras's epoch line precedes the timer's
            keras.callbacks.LearningRateScheduler(lambda epoch, _: args.lr * args.lr_decay**epoch),
            timer,
            *([keras.callbacks.CSVLogger(str(args.out / "log.csv"))] if hooks.writes else []),
        ]),
    )
    summary = {
        "model": args.model,
        "lanes": [str(lane) for lane in setup.lanes] if setup.lanes else None,
        "params": model.count_params(),
        "devices": setup.devices,
        "main_device": setup.main_device,
        "placement_strategy": args.placement if setup.placement else None,
        "placement": json.loads(placement_to_json(setup.placement)) if setup.placement else None,
        "speeds": setup.speeds,
        "cost": args.cost if setup.costs else None,
        "costs": setup.costs,
        "dataset": data.name,
        "train_examples": len(data.x_train),
        "test_examples": len(data.x_test),
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "learning_rate": args.lr,
        "lr_decay": args.lr_decay,
        "seed": args.seed,
        "epoch_seconds": timer.seconds,
        "test_accuracy": history.history["val_accuracy"][-1],
        "test_loss": history.history["val_loss"][-1],
    }
    if hooks.writes:
        write_outputs(args.out, model, setup.placement, summary)
    print(f"test accuracy: {summary['test_accuracy']:.4f}")
    return summary


def write_outputs(out: Path, model: CapsuleClassifier, placement: dict[int, str] | None, summary: dict) -> None:
    """Write model.keras, placement.json (if the lanes were placed), summary.json (log.csv is the
    CSVLogger's) into ``out`` and say so."""
    written = ["model.keras", "log.csv", "summary.json"]
    model.save(out / "model.keras")
    if placement:
        (out / "placement.json").write_text(placement_to_json(placement) + "\n")
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
