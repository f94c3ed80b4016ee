"""``tfnhr`` command line.  Sub-commands:

* ``tfnhr info`` — versions of the pinned stack, visible devices and what Horovod was built with
  (or that it is not installed).
* the others live in :mod:`tfnhr.commands` (one module each, listed in ``COMMAND_MODULES``); each
  module has ``register(commands)`` adding its parser with ``set_defaults(run=...)``. Library
  modules (which load TensorFlow) are imported inside the ``run`` functions, so ``--help`` stays
  fast; the choices come from :mod:`tfnhr.choices`.
"""

from __future__ import annotations

import argparse
import importlib
import platform
import sys
from collections.abc import Sequence


def run_info(_: argparse.Namespace) -> int:
    """Print the stack: Python, TensorFlow, Keras, Horovod and devices."""
    import keras
    import tensorflow as tf

    import tfnhr
    from tfnhr import horovod_build

    rows = [
        ("tfnhr", tfnhr.__version__),
        ("python", platform.python_version()),
        ("tensorflow", tf.__version__),
        ("keras", f"{keras.__version__} (backend {keras.backend.backend()})"),
        ("devices", ", ".join(d.name for d in tf.config.list_logical_devices())),
        ("horovod", horovod_build.summary(horovod_build.check_build() if horovod_build.installed() else None)),
    ]
    width = max(len(name) for name, _ in rows) + 1
    for name, value in rows:
        print(f"{name + ':':<{width}}  {value}")
    return 0


COMMAND_MODULES: tuple[str, ...] = ("train", "evaluate", "recognize", "synth", "lm", "convert", "dump", "serve")
"""Modules of :mod:`tfnhr.commands` whose sub-commands ``tfnhr`` offers, in help order."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with all sub-commands."""
    parser = argparse.ArgumentParser(prog="tfnhr", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("info", help="show the installed stack and devices").set_defaults(run=run_info)
    for name in COMMAND_MODULES:
        importlib.import_module(f"tfnhr.commands.{name}").register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tfnhr`` console script."""
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
