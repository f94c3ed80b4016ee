"""What ``capsnet train`` and ``capsnet place`` share: the lanes of the lane options
(:mod:`capsnet.arguments`), placement warnings as lines, and the one-line error report."""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence

from capsnet.lanes import Lane, lane_list
from capsnet.placement import place


def lanes_from_args(args: argparse.Namespace) -> list[Lane]:
    """The lanes that :func:`capsnet.arguments.add_lane_arguments`' options give; ``ValueError`` for a bad spec."""
    return lane_list(args.lane_spec, args.lanes, args.width, args.depth)


@contextlib.contextmanager
def warnings_as_lines(command: str) -> Iterator[None]:
    """Inside the block, Python warnings (e.g. :func:`capsnet.placement.place`'s idle devices) go
    to stderr as one line each, ``capsnet COMMAND: warning: ...``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for warning in caught:
                print(f"capsnet {command}: warning: {warning.message}", file=sys.stderr)


def place_lanes(command: str, lanes: Sequence[Lane], devices: Sequence[str], strategy: str,
                speeds: Mapping[str, float], costs: Sequence[float], seed: int,
                check_devices: bool = True) -> dict[int, str]:
    """:func:`capsnet.placement.place` with its warnings as lines (:func:`warnings_as_lines`)."""
    with warnings_as_lines(command):
        return place(lanes, devices, strategy, speeds, costs, seed, check_devices=check_devices)


def report_error(args: argparse.Namespace, error: Exception) -> int:
    """Print ``capsnet COMMAND: error: MESSAGE`` as one line on stderr; returns exit status 2."""
    message = " ".join(str(error).splitlines())
    print(f"capsnet {args.command}: error: {message}", file=sys.stderr)
    return 2
