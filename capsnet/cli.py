"""``capsnet`` command line: train a CapsNet or Multi-Lane CapsNet, plan lane placements.

Sub-commands live in :mod:`capsnet.commands` (one module each, listed in ``COMMAND_MODULES``);
each module has ``register(commands)`` adding its parser with ``set_defaults(run=...)``. They
import TensorFlow (for their choices) but run no op until a command has made its devices:

* ``capsnet train`` — train on Fashion-MNIST, MNIST, CIFAR-10 or a synthetic set, lanes placed on devices.
* ``capsnet place`` — print the lane -> device placement (and device loads) for a lane spec and device speeds.

Bad input ends with exit status 2 and one line on stderr, ``capsnet COMMAND: error: ...``.
TensorFlow's INFO logs are off unless ``TF_CPP_MIN_LOG_LEVEL`` is set, and its oneDNN kernels are
on unless ``TF_ENABLE_ONEDNN_OPTS`` is set (:mod:`capsnet.environment`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from capsnet.environment import prefer_onednn

COMMAND_MODULES: tuple[str, ...] = ("train", "place")
"""Modules of :mod:`capsnet.commands` whose sub-commands ``capsnet`` offers, in help order."""


class OneLineErrorParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line on stderr (exit status 2)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with all sub-commands."""
    parser = OneLineErrorParser(prog="capsnet", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f"capsnet.commands.{name}").register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``capsnet`` console script; returns the exit status."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # before TensorFlow's first import
    prefer_onednn()
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
