"""``capsnet place``: where each MLCN lane goes for a lane spec and device speeds (Rosario et al. 2019, §IV),
as a table or JSON; the devices may be hypothetical (nothing runs on them unless ``--probe``)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence

from capsnet.arguments import add_cost_argument, add_lane_arguments
from capsnet.commands.common import lanes_from_args, place_lanes, report_error
from capsnet.devices import parse_devices, prepare_devices
from capsnet.lanes import Lane
from capsnet.placement import (STRATEGIES, device_loads, format_placement_table, lane_costs, placement_to_json,
                               probe_device_speed, speed_map)


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``place`` to the ``capsnet`` sub-commands."""
    parser = commands.add_parser(
        "place", help="print a lane -> device placement with device loads",
        description="Place MLCN lanes on devices and print one row per lane: lane, width, depth, cost, "
                    "device, device speed and device load (the summed costs of its lanes / its speed), "
                    "then the makespan (the largest load). Idle devices are warned about on stderr.",
        epilog="--cost measured times each lane on this host's CPU:0 with 28x28x1 images, 10 classes "
               "and batches of 32.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_lane_arguments(parser)
    parser.add_argument("--devices", required=True,
                        help="comma-separated devices, e.g. gpu:0,gpu:1,gpu:2,gpu:3; they need not exist "
                             "on this host unless --probe")
    speeds = parser.add_mutually_exclusive_group()
    speeds.add_argument("--speeds", default="equal",
                        help="'equal' (all 1.0) or one speed factor per device, e.g. 1,3.1,4.2,6")
    speeds.add_argument("--probe", action="store_true",
                        help="measure the speeds (capsnet.placement.probe_device_speed) on the devices, which "
                             "must then exist (cpu:K beyond the present CPUs become logical CPUs)")
    parser.add_argument("--strategy", choices=(*STRATEGIES, "all"), default="greedy",
                        help="placement strategy; all = each one's table, then their makespans")
    add_cost_argument(parser)
    parser.add_argument("--seed", type=int, default=0, help="seed of the random strategy")
    parser.add_argument("--json", action="store_true",
                        help="print a JSON object (placement, loads, makespan; one per strategy for "
                             "--strategy all) instead of tables")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Place and print; returns the exit status (2 with a one-line reason for bad input)."""
    try:
        lanes = lanes_from_args(args)
        if args.probe:
            devices = prepare_devices(args.devices)
            speeds = probe_device_speed(devices)
        else:
            devices = parse_devices(args.devices)
            speeds = speed_map(args.speeds, devices)
        costs = lane_costs(args.cost, lanes)
        strategies = STRATEGIES if args.strategy == "all" else (args.strategy,)
        placements = {strategy: place_lanes("place", lanes, devices, strategy, speeds, costs, args.seed,
                                            check_devices=args.probe)
                      for strategy in strategies}
    except ValueError as error:
        return report_error(args, error)
    reports = {strategy: placement_report(strategy, lanes, placement, speeds, costs)
               for strategy, placement in placements.items()}
    if args.json:
        print(json.dumps(reports if args.strategy == "all" else reports[args.strategy], indent=1))
        return 0
    tables = {strategy: format_placement_table(lanes, placement, speeds, costs)
              for strategy, placement in placements.items()}
    if args.strategy != "all":
        print(tables[args.strategy])
        return 0
    for strategy, table in tables.items():
        print(f"{strategy}:\n{table}\n")
    best = min(reports, key=lambda strategy: reports[strategy]["makespan"])
    print("makespan by strategy: "
          + ", ".join(f"{strategy} {report['makespan']:.6g}" for strategy, report in reports.items())
          + f" (best: {best})")
    return 0


def placement_report(strategy: str, lanes: Sequence[Lane], placement: Mapping[int, str],
                     speeds: Mapping[str, float], costs: Sequence[float]) -> dict:
    """A JSON-able record of one placement: strategy, lanes (``"WxD"``), costs, speeds, placement
    (lane index string -> device), loads (device -> costs / speed, every device) and makespan."""
    devices = list(speeds)
    loads = device_loads(costs, [devices.index(placement[lane]) for lane in range(len(lanes))],
                         [speeds[device] for device in devices])
    return {"strategy": strategy, "lanes": [str(lane) for lane in lanes], "costs": list(costs),
            "speeds": dict(speeds), "placement": json.loads(placement_to_json(placement)),
            "loads": dict(zip(devices, loads)), "makespan": max(loads)}
