"""Lane placement on four devices: greedy vs random vs round-robin (Rosario et al. 2019, §IV, §VI-D/E).

Rosario et al. 2019 ran MLCNs of 6, 9, 12 and 24 lanes, each lane's width and depth drawn from
1..5, on four K80 GPUs (Fig. 7) and on one K80, M40, P100 and V100 (speed factors 1, 3.1, 4.2, 6;
Fig. 8); the greedy partition (largest lane first, to the device that finishes it first) was up to ~50 %
faster than a random one, and the cost model ``width² · depth`` had a Pearson correlation of
0.901 with measured lane times.

Usage::

    python benchmarks/placement.py [--quick] [--trials 5] [--draws 20] [--threads 1] [--seed 0] [--out res.json]

Without ``--out`` the JSON goes to stdout after the table (the table then goes to stderr).

What it measures
----------------

1. **Predicted makespans** (cost model only): for each lane count and trial (lanes drawn with a
   fixed seed), on 4 devices of equal speed and on the speeds of Rosario et al. 2019 (1, 3.1, 4.2,
   6; the speed set named ``"seed"`` in the JSON): the makespan (largest sum of ``w²·d`` / speed
   over the devices) of the greedy partition, the mean over ``--draws`` random partitions, and
   round-robin; ratios random / greedy, round-robin / greedy.
2. **Measured lane times**: every distinct lane of the draws, as ``capsnet.models.LaneBlock``
   (10 classes, 3 routings) on a ``[--batch-size, 28, 28, 1]`` batch, one forward + backward
   step on ``/device:CPU:0`` (median of ``--repeats``). The Pearson correlation of ``w²·d`` with
   these seconds, and a linear fit ``seconds ≈ a + b·w²·d``.
3. **Measured makespans**: the placements of part 1 (greedy planned with the cost model, as
   Rosario et al. 2019 do), timed with the measured lane seconds: per device the sum of its lanes' seconds
   divided by its (emulated) speed factor. Also greedy planned with the measured seconds
   themselves (how much the cost model's error costs). This host has 2 physical cores, so its 4
   logical CPU devices cannot run 4 lanes concurrently: the per-device times are computed from
   lane times measured one at a time, not observed.
4. **A real run**: one configuration's lanes, each under ``tf.device(placement[i])`` on the 4
   logical CPUs inside one ``tf.function`` (forward + backward), greedy against random
   placement, steps interleaved. The logical devices share the physical cores and TensorFlow's
   thread pools, so the wall times show that placed lanes run, not what 4 real devices would gain.
Also reported: ``probe_device_speed`` of the 4 logical CPUs (the tiny-network speed probe of
Rosario et al. 2019; on one host they are the same cores, so all factors are near 1).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import _harness
import keras
import numpy as np
import tensorflow as tf

from capsnet.devices import configure_logical_cpus
from capsnet.lanes import Lane, as_lane
from capsnet.models import LaneBlock
from capsnet.placement import (
    greedy_partition,
    lane_cost,
    makespan,
    measure_lane_costs,
    probe_device_speed,
    random_partition,
    round_robin_partition,
    seconds_per_call,
    training_step,
)

N_DEVICES = 4
SPEED_SETS = {"equal": (1.0, 1.0, 1.0, 1.0), "seed": (1.0, 3.1, 4.2, 6.0)}
INPUT_SHAPE = (28, 28, 1)
N_CLASS = 10
SETTINGS = {
    # lane_counts: MLCN sizes (Rosario et al. 2019, §VI-E); real_lanes: lane count of the real run; rounds: its
    # interleaved timed steps per placement.
    "full": {"lane_counts": (6, 9, 12, 24), "trials": 5, "draws": 20, "real_lanes": 12, "rounds": 5},
    "quick": {"lane_counts": (6, 9), "trials": 1, "draws": 10, "real_lanes": 6, "rounds": 2},
}


def draw_lanes(seed: int, n_lanes: int, trial: int) -> list[Lane]:
    """``n_lanes`` lanes with width and depth uniform in 1..5, fixed by ``(seed, n_lanes, trial)``."""
    rng = np.random.default_rng([seed, n_lanes, trial])
    return [Lane(int(w), int(d)) for w, d in rng.integers(1, 6, size=(n_lanes, 2))]


def plan(args, settings) -> list[dict]:
    """Part 1: one record per (lane count, trial, speed set) with the three placements and their
    predicted makespans (cost-model units)."""
    instances = []
    for n_lanes in settings["lane_counts"]:
        for trial in range(args.trials):
            lanes = draw_lanes(args.seed, n_lanes, trial)
            costs = [lane_cost(lane) for lane in lanes]
            draw_seeds = np.random.default_rng([args.seed, n_lanes, trial, 1]).integers(2**31, size=args.draws)
            randoms = [random_partition(n_lanes, N_DEVICES, int(s)) for s in draw_seeds]
            for speed_name, speeds in SPEED_SETS.items():
                partitions = {"greedy": greedy_partition(costs, speeds),
                              "round_robin": round_robin_partition(n_lanes, N_DEVICES)}
                instances.append({
                    "n_lanes": n_lanes, "trial": trial, "speeds": speed_name,
                    "lanes": [str(lane) for lane in lanes], "partitions": partitions, "random": randoms,
                    "predicted": spans(costs, partitions, randoms, speeds),
                })
    return instances


def spans(costs, partitions: dict, randoms: list, speeds) -> dict:
    """Makespans of the named partitions and the mean over the random ones, plus their ratios to greedy."""
    out = {name: makespan(costs, assignment, speeds) for name, assignment in partitions.items()}
    out["random"] = float(np.mean([makespan(costs, assignment, speeds) for assignment in randoms]))
    out["random/greedy"] = out["random"] / out["greedy"]
    out["round_robin/greedy"] = out["round_robin"] / out["greedy"]
    return out


def measure_lanes(args, instances: list[dict]) -> dict:
    """Parts 2 and 3: time every distinct lane once, then recompute each instance's makespans
    with the measured seconds (adds ``instance["measured"]``)."""
    distinct = sorted({lane for inst in instances for lane in inst["lanes"]},
                      key=lambda s: tuple(map(int, s.split("x"))))
    _harness.log(f"measuring {len(distinct)} distinct lanes on /device:CPU:0 (batch {args.batch_size}) ...")
    seconds = dict(zip(distinct, measure_lane_costs(distinct, INPUT_SHAPE, N_CLASS, "/device:CPU:0",
                                                    args.batch_size, args.repeats)))
    model = np.array([lane_cost(lane) for lane in distinct])
    measured = np.array([seconds[lane] for lane in distinct])
    slope, intercept = np.polyfit(model, measured, 1)
    for inst in instances:
        costs = [seconds[lane] for lane in inst["lanes"]]
        speeds = SPEED_SETS[inst["speeds"]]
        inst["measured"] = spans(costs, inst["partitions"], inst["random"], speeds)
        oracle = greedy_partition(costs, speeds)
        inst["measured"]["greedy_on_measured"] = makespan(costs, oracle, speeds)
    return {
        "lane_seconds": seconds,
        "pearson_model_vs_measured": float(np.corrcoef(model, measured)[0, 1]),
        "fit_seconds": {"intercept": float(intercept), "per_cost_unit": float(slope)},
    }


class PlacedLanes(keras.layers.Layer):
    """All lanes of an MLCN, lane ``i`` under ``tf.device(placement[i])``: ``[B, H, W, C]`` -> ``[B, K, L]``."""

    def __init__(self, lanes: list[Lane], placement: dict[int, str]):
        super().__init__()
        self.placement = placement
        self.blocks = [LaneBlock(lane, N_CLASS, routings=3) for lane in lanes]

    def call(self, images):
        outputs = []
        for index, block in enumerate(self.blocks):
            with tf.device(self.placement[index]):
                outputs.append(block(images))
        return tf.stack(outputs, axis=-1)


def real_run(args, settings, instances: list[dict], lane_seconds: dict[str, float]) -> dict:
    """Part 4: the first trial of ``real_lanes`` lanes at equal speeds, each lane pinned to its
    logical CPU, greedy vs the first random partition; wall seconds per forward + backward step
    (median of interleaved steps), next to the sum of the lanes' one-at-a-time seconds (what a
    fully serial run would take)."""
    inst = next(i for i in instances if (i["n_lanes"], i["trial"], i["speeds"]) == (settings["real_lanes"], 0, "equal"))
    lanes = [as_lane(lane) for lane in inst["lanes"]]
    devices = [f"/device:CPU:{i}" for i in range(N_DEVICES)]
    partitions = {"greedy": inst["partitions"]["greedy"], "random": inst["random"][0]}
    images = tf.random.stateless_uniform((args.batch_size, *INPUT_SHAPE), seed=(0, 1))
    steps = {}
    for name, assignment in partitions.items():
        layer = PlacedLanes(lanes, {lane: devices[d] for lane, d in enumerate(assignment)})
        layer(images)
        steps[name] = training_step(layer)
        seconds_per_call(steps[name], images, repeats=1)  # trace + warm up; untimed
    _harness.log(f"real run: {len(lanes)} lanes on {N_DEVICES} logical CPUs, {settings['rounds']} interleaved "
                 "steps each ...")
    times = {name: [] for name in steps}
    for round_ in range(settings["rounds"]):
        for name in sorted(steps, reverse=bool(round_ % 2)):
            times[name].append(seconds_per_call(steps[name], images, repeats=1, warmup=0))
    out = {"lanes": inst["lanes"], "partitions": partitions,
           "sum_of_lane_seconds": sum(lane_seconds[lane] for lane in inst["lanes"])}
    for name in partitions:
        out[name] = {"wall_s": float(np.median(times[name])), "wall_s_all": times[name]}
    out["random/greedy wall"] = out["random"]["wall_s"] / out["greedy"]["wall_s"]
    out["random/greedy predicted"] = makespan([lane_cost(lane) for lane in lanes], partitions["random"],
                                              SPEED_SETS["equal"]) / inst["predicted"]["greedy"]
    return out


def summarise(instances: list[dict], key: str) -> list[dict]:
    """Mean over trials per (lane count, speed set) of the ``key`` ("predicted"/"measured") spans."""
    groups = {}
    for inst in instances:
        groups.setdefault((inst["n_lanes"], inst["speeds"]), []).append(inst[key])
    return [{"n_lanes": n, "speeds": speeds, "trials": len(rows),
             **{field: float(np.mean([row[field] for row in rows])) for field in rows[0]},
             "random/greedy min": float(min(row["random/greedy"] for row in rows))}
            for (n, speeds), rows in groups.items()]


def format_summary(rows: list[dict], title: str, unit: str) -> str:
    fields = [f for f in ("greedy", "greedy_on_measured", "random", "round_robin") if f in rows[0]]
    header = ["lanes", "speeds", *fields, "random/greedy", "(min)", "rr/greedy"]
    lines = [title, "  ".join(f"{h:>18}" if i > 1 else f"{h:>6}" for i, h in enumerate(header))]
    for row in rows:
        cells = [f"{row['n_lanes']:>6}", f"{row['speeds']:>6}", *(f"{row[f]:>18.4g}" for f in fields),
                 f"{row['random/greedy']:>18.3f}", f"{row['random/greedy min']:>18.3f}",
                 f"{row['round_robin/greedy']:>18.3f}"]
        lines.append("  ".join(cells))
    lines.append(f"(makespans in {unit}; means over trials; random = mean over the random draws)")
    return "\n".join(lines)


def format_report(doc: dict) -> str:
    parts = [format_summary(doc["predicted"], "Predicted makespan (cost model w²·d / speed):", "cost units")]
    if "lanes" in doc:
        lanes = doc["lanes"]
        parts.append(f"Lane times: Pearson r(w²·d, measured seconds) = {lanes['pearson_model_vs_measured']:.3f} "
                     f"over {len(lanes['lane_seconds'])} lanes (Rosario et al. 2019: 0.901); fit seconds ≈ "
                     f"{lanes['fit_seconds']['intercept']:.4g} + {lanes['fit_seconds']['per_cost_unit']:.4g}·w²·d")
        parts.append(format_summary(doc["measured"], "Measured makespan (per device: sum of its lanes' measured "
                                    "seconds / emulated speed):", "seconds per step"))
        real = doc["real_run"]
        parts.append(f"Real run, {len(real['lanes'])} lanes on 4 logical CPUs: "
                     f"greedy {real['greedy']['wall_s']:.4g} s, "
                     f"random {real['random']['wall_s']:.4g} s per step; random/greedy wall "
                     f"{real['random/greedy wall']:.3f} (predicted for 4 real devices: "
                     f"{real['random/greedy predicted']:.3f}); the lanes one at a time: "
                     f"{real['sum_of_lane_seconds']:.4g} s")
    parts.append("Device speed probe of the 4 logical CPUs: "
                 + ", ".join(f"{d} {s:.2f}" for d, s in doc["speed_probe"].items()))
    parts.extend(doc.get("notes", []))
    return "\n\n".join(parts)


NOTES = [
    "This host has 2 physical cores shared by the 4 logical CPU devices and TensorFlow's thread pools: "
    "they cannot run 4 lanes concurrently. Measured makespans are therefore computed, not observed: "
    "per device the sum of its lanes' one-at-a-time measured step times divided by the emulated speed factor.",
    "The real run's wall times show placed lanes executing; since all 4 logical devices share the same cores, "
    "its random/greedy ratio need not follow the one predicted for 4 independent devices.",
]


def measure(args: argparse.Namespace) -> dict:
    settings = SETTINGS["quick" if args.quick else "full"]
    args.trials = args.trials or settings["trials"]
    args.draws = args.draws or settings["draws"]
    configure_logical_cpus(N_DEVICES)  # before TensorFlow's first op, like the thread pools
    _harness.set_threads(args.threads)
    start = time.perf_counter()
    instances = plan(args, settings)
    doc = {
        "benchmark": "placement",
        "config": {"quick": args.quick, "threads": args.threads, "trials": args.trials, "draws": args.draws,
                   "batch_size": args.batch_size, "repeats": args.repeats, "seed": args.seed,
                   "lane_counts": settings["lane_counts"], "speed_sets": SPEED_SETS, "devices": N_DEVICES,
                   "input_shape": INPUT_SHAPE, "cpu_count": os.cpu_count()},
        "predicted": summarise(instances, "predicted"),
        "speed_probe": probe_device_speed([f"/device:CPU:{i}" for i in range(N_DEVICES)]),
    }
    if not args.no_measure:
        doc["lanes"] = measure_lanes(args, instances)
        doc["measured"] = summarise(instances, "measured")
        doc["real_run"] = real_run(args, settings, instances, doc["lanes"]["lane_seconds"])
        doc["notes"] = NOTES
    doc["instances"] = instances
    doc["total_s"] = time.perf_counter() - start
    print(format_report(doc))
    return doc


def main(argv=None) -> int:
    parser = _harness.parser(__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer and smaller configurations: a smoke run")
    parser.add_argument("--trials", type=int, help="lane draws per lane count (default 5; quick 1)")
    parser.add_argument("--draws", type=int, help="random partitions per instance (default 20; quick 10)")
    parser.add_argument("--batch-size", type=int, default=16, help="batch of the measured lane steps")
    parser.add_argument("--repeats", type=int, default=3, help="timed steps per measured lane (median)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-measure", action="store_true", help="cost-model predictions only (parts 1 and probe)")
    return _harness.main(measure, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
