"""``tfnhr`` command line.  Sub-commands:

* ``tfnhr info`` — versions of the pinned stack, cores, GPUs and what Horovod was built with
  (or that it is not installed); ``--devices`` adds TensorFlow's own view.
* the others live in :mod:`tfnhr.commands` (one module each, listed in ``COMMAND_MODULES``); each
  module has ``register(commands)`` adding its parser with ``set_defaults(run=...)``. Library
  modules (which load TensorFlow) are imported inside the ``run`` functions, so ``--help`` stays
  fast; the choices come from :mod:`tfnhr.config.choices`.
"""

from __future__ import annotations

import argparse
import importlib
import platform
import sys
from collections.abc import Sequence

from tfnhr.commands.common import CommandParser
from tfnhr.runtime.console import quiet_libraries


def run_info(args: argparse.Namespace) -> int:
    """Print the stack: Python, TensorFlow, Keras, Horovod, cores and GPUs, from package metadata
    and files (fast: nothing heavy is imported); with ``--devices`` also TensorFlow's devices and
    what Horovod was built with (:func:`tfnhr.runtime.horovod_build.check_build`; seconds: they start TensorFlow)."""
    import tfnhr
    from tfnhr.runtime import horovod_build, stack

    rows = [
        ("tfnhr", tfnhr.__version__),
        ("python", platform.python_version()),
        ("tensorflow", stack.version("tensorflow-cpu", "tensorflow")),
        ("keras", f"{stack.version('keras')} (backend {stack.keras_backend()})"),
        ("cpus", str(stack.usable_cores())),
        ("gpus", stack.nvidia_gpus()),
    ]
    if args.devices:
        import tensorflow as tf

        rows.append(("devices", ", ".join(d.name for d in tf.config.list_logical_devices())))
    if not horovod_build.installed():
        rows.append(("horovod", stack.NOT_INSTALLED))
    elif args.devices:
        rows.append(("horovod", horovod_build.summary(horovod_build.check_build())))
    else:
        rows.append(("horovod", f"{stack.version('horovod')}, frameworks: "
                                f"{', '.join(horovod_build.built_frameworks()) or 'none'} (controllers: --devices)"))
    width = max(len(name) for name, _ in rows) + 1
    for name, value in rows:
        print(f"{name + ':':<{width}}  {value}")
    return 0


COMMAND_MODULES: tuple[str, ...] = ("train", "evaluate", "recognize", "export", "synth", "lm", "convert", "dump", "serve")
"""Modules of :mod:`tfnhr.commands` whose sub-commands ``tfnhr`` offers, in help order."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with all sub-commands."""
    parser = CommandParser(prog="tfnhr", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    info = commands.add_parser("info", help="show the installed stack and devices")
    info.add_argument("--devices", action="store_true",
                      help="also ask TensorFlow for its devices and horovodrun for its build (seconds)")
    info.set_defaults(run=run_info)
    for name in COMMAND_MODULES:
        importlib.import_module(f"tfnhr.commands.{name}").register(commands)
    for command in leaf_parsers(parser):
        command.add_argument("--verbose", action="store_true", dest="library_logs",
                             help="show TensorFlow's log lines and warnings with their source lines")
    return parser


def leaf_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers of ``parser``'s sub-commands that have none of their own (``tfnhr train``,
    ``tfnhr lm build``, ...), in help order."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                found.extend(leaf_parsers(command) if command._subparsers else [command])
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tfnhr`` console script."""
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # for commands that hand their options on
    quiet_libraries(f"tfnhr {args.command}", args.library_logs)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
