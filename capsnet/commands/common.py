"""Options and helpers shared by ``capsnet train`` and ``capsnet place``: the lane and cost
arguments, placement warnings as lines, and the one-line error report."""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence

from capsnet.lanes import Lane, lane_list
from capsnet.placement import COST_MODELS, place
from capsnet.training import TrainConfig

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


def lanes_from_args(args: argparse.Namespace) -> list[Lane]:
    """The lanes that :func:`add_lane_arguments`' options give; ``ValueError`` for a bad spec."""
    return lane_list(args.lane_spec, args.lanes, args.width, args.depth)


def add_cost_argument(parser: argparse.ArgumentParser) -> None:
    """``--cost model|measured``: how lane costs are obtained (see :func:`lane_costs`)."""
    parser.add_argument("--cost", choices=COST_MODELS, default=DEFAULTS.cost,
                        help="lane cost: model = width²·depth (Rosario et al. 2019, Eq. 1); measured = seconds per "
                             "training step of each lane alone (capsnet.placement.measure_lane_costs)")


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
