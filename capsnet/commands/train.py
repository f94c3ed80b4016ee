"""``capsnet train``: train a CapsNet or a Multi-Lane CapsNet (lanes placed on devices) and save it
(the work is :func:`capsnet.training.train`; this module wires the flags to a
:class:`~capsnet.training.TrainConfig`)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from capsnet.commands.common import DEFAULTS, add_cost_argument, add_lane_arguments, positive_int, report_error, warnings_as_lines
from capsnet.data import DATASET_NAMES
from capsnet.placement import STRATEGIES
from capsnet.training import MODELS, TrainConfig, prepare, train


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
    """The options of ``capsnet train`` (model, lanes, data, training, devices and placement; the
    fields of :class:`~capsnet.training.TrainConfig`), also offered by ``horovod_jobs/train.py --task mlcn``."""
    parser.add_argument("--model", choices=MODELS, default=DEFAULTS.model,
                        help="capsnet = Sabour et al.'s CapsNet; mlcn = Multi-Lane CapsNet")
    add_lane_arguments(parser)
    parser.add_argument("--lane-dropout", type=float, default=DEFAULTS.lane_dropout, help="MLCN: rate of dropping whole lanes")
    parser.add_argument("--routings", type=positive_int, default=DEFAULTS.routings, help="dynamic-routing iterations")
    data = parser.add_argument_group("data")
    data.add_argument("--dataset", choices=DATASET_NAMES, default=DEFAULTS.dataset, help="data set")
    data.add_argument("--data-dir", type=Path, default=None,
                      help="folder searched first for Fashion-MNIST's IDX files (see capsnet.data)")
    data.add_argument("--limit-train", type=positive_int, default=None, help="use the first N training examples")
    data.add_argument("--limit-test", type=positive_int, default=None, help="use the first N test examples")
    training = parser.add_argument_group("training")
    training.add_argument("--epochs", type=positive_int, default=DEFAULTS.epochs, help="epochs")
    training.add_argument("--batch-size", type=positive_int, default=DEFAULTS.batch_size, help="examples per batch")
    training.add_argument("--lr", type=float, default=DEFAULTS.lr, help="Adam's initial learning rate")
    training.add_argument("--lr-decay", type=float, default=DEFAULTS.lr_decay,
                          help="learning rate of epoch e (from 0) = lr · lr_decay^e")
    training.add_argument("--seed", type=int, default=DEFAULTS.seed,
                          help="seed of the weights, the shuffling and the random placement")
    training.add_argument("--threads", type=int, default=DEFAULTS.threads,
                          help="TensorFlow intra- and inter-op threads (0: TensorFlow's default)")
    training.add_argument("--out", type=Path, default=DEFAULTS.out, help="output folder")
    training.add_argument("--resume", action="store_true",
                          help="continue the run in --out: its model.keras (weights and optimizer state), "
                               "epochs from the rows of its log.csv up to --epochs (the total), log.csv appended")
    placement = parser.add_argument_group("devices and placement")
    placement.add_argument("--devices", default=None,
                           help="comma-separated devices for the lanes, e.g. gpu:0,gpu:1 or cpu:0,cpu:1 "
                                "(cpu:K beyond the present CPUs become logical CPUs); default: no pinning, "
                                "TensorFlow places everything; CapsNet takes at most one")
    placement.add_argument("--placement", choices=STRATEGIES, default=DEFAULTS.placement, help="lane placement strategy")
    placement.add_argument("--main-device", default=None,
                           help="device of the capsule assembly, decoder and losses (default: the first of "
                                "--devices)")
    add_cost_argument(placement)
    placement.add_argument("--speeds", default=DEFAULTS.speeds,
                           help="device speed factors: auto (capsnet.placement.probe_device_speed when there "
                                "is more than one device, else equal), equal (all 1.0) or one per device, "
                                "e.g. 1,3.1")


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The :class:`~capsnet.training.TrainConfig` of parsed ``capsnet train`` arguments."""
    return TrainConfig(**{field.name: getattr(args, field.name) for field in dataclasses.fields(TrainConfig)})


def run(args: argparse.Namespace) -> int:
    """Set up, train, save; returns the exit status (2 with a one-line reason for bad input)."""
    config = config_from_args(args)
    try:
        with warnings_as_lines("train"):
            setup = prepare(config)
    except (ValueError, FileNotFoundError, RuntimeError) as error:
        return report_error(args, error)
    train(config, setup)
    return 0
