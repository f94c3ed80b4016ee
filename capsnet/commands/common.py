"""Options and helpers shared by ``capsnet train`` and ``capsnet place``: lanes, lane costs,
device speeds, placing with idle-device warnings, and the one-line error report."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Mapping, Sequence

from capsnet.lanes import Lane, parse_lanes, uniform_lanes
from capsnet.placement import lane_cost, measure_lane_costs, place

COST_MODELS = ("model", "measured")


def positive_int(text: str) -> int:
    """An argparse type: ``"3"`` -> 3; zero, negatives and non-integers are rejected."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def add_lane_arguments(parser: argparse.ArgumentParser) -> None:
    """``--lanes/--width/--depth`` (equal lanes) and ``--lane-spec`` (one WIDTHxDEPTH per lane)."""
    group = parser.add_argument_group(
        "lanes", "N equal lanes (--lanes, --width, --depth) or different ones (--lane-spec)")
    group.add_argument("--lanes", type=int, default=8, help="number of equal lanes")
    group.add_argument("--width", type=int, default=4, help="lane width: 16·width filters per conv stage")
    group.add_argument("--depth", type=int, default=1, help="lane depth: number of conv stages")
    group.add_argument("--lane-spec", metavar="WxD,...",
                       help='one WIDTHxDEPTH per lane, e.g. "4x1,2x3,1x5" (overrides the three above)')


def lanes_from_args(args: argparse.Namespace) -> list[Lane]:
    """The lanes that :func:`add_lane_arguments`' options give; ``ValueError`` for a bad spec."""
    if args.lane_spec is not None:
        return parse_lanes(args.lane_spec)
    return uniform_lanes(args.lanes, args.width, args.depth)


def add_cost_argument(parser: argparse.ArgumentParser) -> None:
    """``--cost model|measured``: how lane costs are obtained (see :func:`lane_costs`)."""
    parser.add_argument("--cost", choices=COST_MODELS, default="model",
                        help="lane cost: model = width²·depth (the seed's Eq. 1); measured = seconds per "
                             "training step of each lane alone (capsnet.placement.measure_lane_costs)")


def lane_costs(kind: str, lanes: Sequence[Lane], **measure_options) -> list[float]:
    """One cost per lane: ``"model"`` -> ``lane_cost``; ``"measured"`` -> ``measure_lane_costs(lanes,
    **measure_options)`` (input shape, classes, device, batch size)."""
    if kind == "measured":
        return measure_lane_costs(lanes, **measure_options)
    return [lane_cost(lane) for lane in lanes]


def speed_map(text: str, devices: Sequence[str]) -> dict[str, float]:
    """``--speeds`` text -> ``{device: speed}``: ``"equal"`` gives 1.0 each, ``"1,3.1"`` one factor
    per device in order. ``ValueError`` for non-numbers or a count that differs from the devices'."""
    if text == "equal":
        return dict.fromkeys(devices, 1.0)
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--speeds: expected comma-separated numbers, one per device, got {text!r}") from None
    if len(values) != len(devices):
        raise ValueError(f"--speeds gives {len(values)} speeds for {len(devices)} devices ({', '.join(devices)})")
    return dict(zip(devices, values))


def place_lanes(command: str, lanes: Sequence[Lane], devices: Sequence[str], strategy: str,
                speeds: Mapping[str, float], costs: Sequence[float], seed: int,
                check_devices: bool = True) -> dict[int, str]:
    """``capsnet.placement.place``; its warnings (idle devices) go to stderr as one line each,
    ``capsnet COMMAND: warning: ...``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        placement = place(lanes, devices, strategy, speeds, costs, seed, check_devices=check_devices)
    for warning in caught:
        print(f"capsnet {command}: warning: {warning.message}", file=sys.stderr)
    return placement


def report_error(args: argparse.Namespace, error: Exception) -> int:
    """Print ``capsnet COMMAND: error: MESSAGE`` as one line on stderr; returns exit status 2."""
    message = " ".join(str(error).splitlines())
    print(f"capsnet {args.command}: error: {message}", file=sys.stderr)
    return 2
