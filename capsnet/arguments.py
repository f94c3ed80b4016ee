"""The command-line options of CapsNet/MLCN training, declared as arguments of a parser: those of
``capsnet train`` and of ``train.py --task mlcn`` (the fields of
:class:`~capsnet.training.TrainConfig`), and the lane and cost options that ``capsnet place``
shares."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from capsnet.data import DATASET_NAMES
from capsnet.placement import COST_MODELS, STRATEGIES
from capsnet.training import MODELS, TrainConfig

DEFAULTS = TrainConfig()


def positive_int(text: str) -> int:
    """An argparse type: ``"3"`` -> 3; zero, negatives and non-integers are rejected."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def add_lane_arguments(parser: argparse.ArgumentParser) -> None:
    """``--lanes/--width/--depth`` (equal lanes) and ``--lane-spec`` (one WIDTHxDEPTH per lane)."""
    group = parser.add_argument_group(
        "lanes", "N equal lanes (--lanes, --width, --depth) or different ones (--lane-spec)")
    group.add_argument("--lanes", type=int, default=DEFAULTS.lanes, help="number of equal lanes")
    group.add_argument("--width", type=int, default=DEFAULTS.width, help="lane width: 16·width filters per conv stage")
    group.add_argument("--depth", type=int, default=DEFAULTS.depth, help="lane depth: number of conv stages")
    group.add_argument("--lane-spec", metavar="WxD,...",
                       help='one WIDTHxDEPTH per lane, e.g. "4x1,2x3,1x5" (overrides the three above)')


def add_cost_argument(parser: argparse.ArgumentParser) -> None:
    """``--cost model|measured``: how lane costs are obtained (see :func:`capsnet.placement.lane_costs`)."""
    parser.add_argument("--cost", choices=COST_MODELS, default=DEFAULTS.cost,
                        help="lane cost: model = width²·depth (Rosario et al. 2019, Eq. 1); measured = seconds per "
                             "training step of each lane alone (capsnet.placement.measure_lane_costs)")


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
