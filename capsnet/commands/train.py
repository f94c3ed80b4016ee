"""``capsnet train``: train a CapsNet or a Multi-Lane CapsNet (lanes placed on devices) and save it
(the work is :func:`capsnet.training.train`; this module wires the flags to a
:class:`~capsnet.training.TrainConfig`)."""

from __future__ import annotations

import argparse

from capsnet.arguments import add_train_arguments, config_from_args
from capsnet.commands.common import report_error, warnings_as_lines
from capsnet.training import prepare, train


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
