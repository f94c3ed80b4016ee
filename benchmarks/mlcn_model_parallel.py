"""MLCN model parallel across Horovod ranks (Rosario et al. 2019's "mlcn-model"), in one run.

1. **Scaling** (MLCN 8 lanes x width 4, depth 1, batch 100, synthetic 28x28 shapes):
   ``train.py --task mlcn`` on 1 rank, on 2 ranks ``--parallel model`` (4 lanes each) and on 2
   ranks ``--parallel data`` (``--sync gradients``, 50 examples per rank and step). Every rank has
   one intra-op and one inter-op thread and its own core. Figures: step time, examples/s, speedup
   over 1 rank, efficiency (speedup / 2). Step time = rank 0's seconds from an epoch's start to its
   last training batch (validation excluded) / steps, median over the epochs after the first of
   ``--rounds`` interleaved rounds of the runs. Each round also runs two 1-rank jobs at once, one
   per core: *capacity* = 2 x (1-rank step alone) / (1-rank step beside another), what two cores
   of this shared VM give this workload at the time (2.0: two independent cores; their caches and
   memory bandwidth are shared). It is as noisy as the runs: slow epochs of the 1-rank run alone
   can push it above 2.
2. **Collectives**: the exchanges of one model-parallel step of that model, alone, on 2 ranks
   (allgather of ``[4, 100, 10]`` lane outputs; grouped allreduce of the replicated decoder's
   gradients), median of 30 after 5 untimed: their seconds and their share of the step.
3. **Heterogeneous ranks** (12 lanes, width and depth drawn from 1..3 with a fixed seed, batch
   100): rank 1's core is shared with a busy-loop process, which halves its speed (``--speeds
   auto`` probes each rank's own device under that load). Greedy vs round-robin vs random
   placements (``--random-draws`` seeds): measured step time, and the cost model's predicted
   makespan of each (``w²·d`` / probed speed, from ``summary.json``); ratios to greedy.

    python benchmarks/mlcn_model_parallel.py --out build/bench/mlcn_model_parallel.json [--quick]

Internally each rank runs ``benchmarks/horovod_scaling.py --worker`` (timer) or this file with
``--collectives REPORT`` (part 2). A GPU comparison (lanes on a GPU vs on the CPU) needs a GPU
host: see ``docs/capsnet.md``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _harness
import horovod_scaling

MODEL = ["--task", "mlcn", "--model", "mlcn", "--dataset", "synthetic", "--threads", "1"]
SCALING = {"full": (1000, 4), "quick": (600, 3)}  # (training examples, epochs)
HETEROGENEOUS = {"full": (800, 4), "quick": (400, 3)}
RUNS = (("1 rank", 1, ["--batch-size", "100"]),
        ("2 ranks, model parallel", 2, ["--batch-size", "100", "--parallel", "model"]),
        ("2 ranks, data parallel", 2, ["--batch-size", "50", "--parallel", "data", "--sync", "gradients"]))
"""Each run's steps see 100 examples (data parallel: 50 per rank), so all take the same optimizer steps."""
PAIRED = "2 x 1 rank at once"
LANES, WIDTH = 8, 4
DECODER = ((LANES * 10, 512), (512,), (512, 1024), (1024,), (1024, 784), (784,))
"""Shapes of the replicated weights (decoder on 10 classes x 8 lanes, 28x28x1 output)."""


def job_env() -> dict:
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "", "TF_ENABLE_ONEDNN_OPTS": "1",
            "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}


def steady(epoch_seconds: list[list[float]]) -> tuple[float, float, float]:
    """Median, lowest and highest of the epochs after each run's first (which traces the model);
    ``epoch_seconds`` holds one list per run."""
    later = [seconds for run in epoch_seconds for seconds in run[1:]]
    return statistics.median(later), min(later), max(later)


def scaling(root: Path, quick: bool, rounds: int) -> dict:
    """Each run ``rounds`` times, the runs interleaved (this VM's speed drifts by up to 2x over
    minutes); step time = the median over every round's epochs after the first."""
    examples, epochs = SCALING["quick" if quick else "full"]
    steps = examples // 100
    options = [*MODEL, "--lanes", str(LANES), "--width", str(WIDTH), "--depth", "1", "--limit-train",
               str(steps * 100), "--limit-test", "100", "--epochs", str(epochs), "--speeds", "equal"]
    seconds: dict[str, list[list[float]]] = {name: [] for name, _, _ in RUNS}
    seconds[PAIRED] = []
    for round_ in range(rounds):
        for name, ranks, extra in RUNS:
            folder = root / f"round{round_}" / name.replace(" ", "_").replace(",", "")
            folder.mkdir(parents=True)
            seconds[name].append(horovod_scaling.launch(ranks, [*options, *extra, "--out", str(folder / "out")],
                                                        job_env(), folder))
            print(f"round {round_ + 1} {name:26s} steps {', '.join(f'{s / steps:.3f}' for s in seconds[name][-1][1:])} s",
                  flush=True)
        seconds[PAIRED].extend(paired_runs(root / f"round{round_}" / "paired", [*options, *RUNS[0][2]]))
        print(f"round {round_ + 1} {PAIRED:26s} steps " + "; ".join(
            ", ".join(f"{s / steps:.3f}" for s in run[1:]) for run in seconds[PAIRED][-2:]) + " s", flush=True)
    paired_median = steady(seconds.pop(PAIRED))[0]
    runs = {}
    for name, ranks, _ in RUNS:
        median, low, high = steady(seconds[name])
        runs[name] = {"ranks": ranks, "epoch_train_seconds": seconds[name], "step_seconds": median / steps,
                      "step_seconds_range": [low / steps, high / steps], "examples_per_second": steps * 100 / median}
    one = runs["1 rank"]["examples_per_second"]
    for run in runs.values():
        run["speedup"] = run["examples_per_second"] / one
        run["efficiency"] = run["speedup"] / run["ranks"]
    capacity = 2 * runs["1 rank"]["step_seconds"] / (paired_median / steps)
    print(f"capacity of two cores for this workload: {capacity:.2f} (1-rank step beside another "
          f"{paired_median / steps:.3f} s)", flush=True)
    return {"examples_per_epoch": steps * 100, "epochs": epochs, "steps_per_epoch": steps, "rounds": rounds,
            "lanes": f"{LANES} x width {WIDTH}, depth 1", "runs": runs,
            "paired_one_rank_step_seconds": paired_median / steps, "two_core_capacity": capacity}


def paired_runs(folder: Path, job_argv: list[str]) -> list[list[float]]:
    """Two 1-rank jobs at once, one pinned to each of the first two cores: their epoch seconds."""
    cpus = sorted(os.sched_getaffinity(0))[:2]

    def one(index: int) -> list[float]:
        (folder / str(index)).mkdir(parents=True)
        return horovod_scaling.launch(1, [*job_argv, "--out", str(folder / str(index) / "out")], job_env(),
                                      folder / str(index), cpus=[cpus[index]])

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, range(2)))


def run_collectives(report: Path, cpus: str | None) -> int:
    """Inside ``horovodrun -np 2``: time the exchanges of one model-parallel step of the 8x4
    model (each rank pinned to its core); rank 0 writes the medians."""
    horovod_scaling.pin_local_rank(cpus)
    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.init()
    lane_outputs = tf.random.normal((LANES // hvd.size(), 100, 10))
    gradients = [tf.random.normal(shape) for shape in DECODER]
    exchanges = {
        "allgather_lane_outputs": lambda: hvd.allgather(lane_outputs, name="lanes").numpy(),
        "allreduce_replicated_gradients": lambda: [g.numpy() for g in hvd.grouped_allreduce(
            gradients, op=hvd.Average, name="replicated")],
    }
    medians = {}
    for name, exchange in exchanges.items():
        times = []
        for repeat in range(35):
            started = time.perf_counter()
            exchange()
            if repeat >= 5:
                times.append(time.perf_counter() - started)
        medians[name] = statistics.median(times)
    if hvd.rank() == 0:
        report.write_text(json.dumps(medians))
    return 0


def collectives(root: Path, step_seconds: float | None) -> dict:
    report = root / "collectives.json"
    cpus = sorted(os.sched_getaffinity(0))
    command = [str(Path(sys.executable).parent / "horovodrun"), "-np", "2", "-H", "localhost:2", "--gloo",
               sys.executable, str(Path(__file__).resolve()), "--collectives", str(report),
               *(["--cpus", ",".join(map(str, cpus))] if len(cpus) >= 2 else [])]
    result = subprocess.run(command, cwd=_harness.REPO, env=job_env(), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"collectives failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    seconds = json.loads(report.read_text())
    total = sum(seconds.values())
    figures = {"seconds": seconds, "per_step_seconds": total,
               "share_of_model_parallel_step": total / step_seconds if step_seconds else None}
    share = f", {100 * total / step_seconds:.1f} % of the model-parallel step" if step_seconds else ""
    print("collectives per step: " + ", ".join(f"{k} {1000 * v:.2f} ms" for k, v in seconds.items())
          + f"; total {1000 * total:.2f} ms{share}", flush=True)
    return figures


def heterogeneous_lanes() -> list[str]:
    """12 lanes, width and depth drawn from 1..3 (fixed seed)."""
    import numpy as np

    return [f"{w}x{d}" for w, d in np.random.default_rng(0).integers(1, 4, size=(12, 2))]


def predicted_makespan(summary: dict) -> float:
    """The cost model's makespan of a run's placement: max over slots of its lanes' costs / speed."""
    from capsnet.placement import device_loads

    slots = list(summary["speeds"])
    where = [slots.index(f"rank {entry['rank']} {entry['device']}") for _, entry in sorted(
        summary["placement"].items(), key=lambda item: int(item[0]))]
    return max(device_loads(summary["costs"], where, list(summary["speeds"].values())))


def heterogeneous(root: Path, quick: bool, draws: int) -> dict:
    examples, epochs = HETEROGENEOUS["quick" if quick else "full"]
    lanes = heterogeneous_lanes()
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("the heterogeneous part needs 2 cores (one per rank)")
    busy = subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{cpus[1]}}})\nwhile True: pass"])
    runs = {}
    try:
        for strategy, seed in [("greedy", 0), ("round_robin", 0), *[("random", draw) for draw in range(draws)]]:
            name = strategy if strategy != "random" else f"random seed {seed}"
            folder = root / "heterogeneous" / name.replace(" ", "_")
            folder.mkdir(parents=True)
            options = [*MODEL, "--lane-spec", ",".join(lanes), "--batch-size", "100", "--limit-train", str(examples),
                       "--limit-test", "100", "--epochs", str(epochs), "--parallel", "model", "--placement", strategy,
                       "--seed", str(seed), "--speeds", "auto", "--out", str(folder / "out")]
            try:
                seconds = horovod_scaling.launch(2, options, job_env(), folder)
            except SystemExit as failure:  # e.g. a random draw that leaves a rank without a lane
                runs[name] = {"failed": str(failure).splitlines()[0]}
                print(f"{name:16s} failed: {runs[name]['failed']}", flush=True)
                continue
            summary = json.loads((folder / "out" / "summary.json").read_text())
            median, low, high = steady([seconds])
            steps = -(-examples // 100)
            runs[name] = {"strategy": strategy, "seed": seed, "step_seconds": median / steps,
                          "step_seconds_range": [low / steps, high / steps],
                          "predicted_makespan": predicted_makespan(summary), "speeds": summary["speeds"],
                          "placement": {lane: entry["rank"] for lane, entry in summary["placement"].items()}}
            print(f"{name:16s} step {median / steps:.3f} s ({low / steps:.3f}-{high / steps:.3f}), predicted "
                  f"makespan {runs[name]['predicted_makespan']:.1f}, speeds "
                  f"{', '.join(f'{v:.2f}' for v in summary['speeds'].values())}", flush=True)
    finally:
        busy.kill()
        busy.wait()
    greedy = runs["greedy"]
    randoms = [run for key, run in runs.items() if key.startswith("random") and "step_seconds" in run]
    ratios = {
        "round_robin / greedy, measured": runs["round_robin"]["step_seconds"] / greedy["step_seconds"],
        "round_robin / greedy, predicted": runs["round_robin"]["predicted_makespan"] / greedy["predicted_makespan"],
    }
    if randoms:
        ratios["random (mean) / greedy, measured"] = (
            statistics.mean(run["step_seconds"] for run in randoms) / greedy["step_seconds"])
        ratios["random (mean) / greedy, predicted"] = (
            statistics.mean(run["predicted_makespan"] for run in randoms) / greedy["predicted_makespan"])
    for key, value in ratios.items():
        print(f"{key}: {value:.2f}", flush=True)
    return {"lanes": lanes, "examples_per_epoch": examples, "epochs": epochs,
            "slowdown": "rank 1's core shared with a busy-loop process", "runs": runs, "ratios": ratios}


def measure(args: argparse.Namespace) -> dict:
    parts = args.parts.split(",")
    results = {}
    with tempfile.TemporaryDirectory(prefix="mlcn_model_parallel_") as temporary:
        root = Path(temporary)
        if "scaling" in parts:
            results["scaling"] = scaling(root, args.quick, args.rounds)
        if "collectives" in parts:
            step = results.get("scaling", {}).get("runs", {}).get("2 ranks, model parallel", {}).get("step_seconds")
            results["collectives"] = collectives(root, step)
        if "heterogeneous" in parts:
            results["heterogeneous"] = heterogeneous(root, args.quick, args.random_draws)
    if "scaling" in results:
        print(f"\n{'run':26s} {'step s':>7s} {'range':>13s} {'examples/s':>10s} {'speedup':>8s} {'efficiency':>10s}")
        for name, run in results["scaling"]["runs"].items():
            low, high = run["step_seconds_range"]
            print(f"{name:26s} {run['step_seconds']:7.3f} {low:6.3f}-{high:6.3f} {run['examples_per_second']:10.1f} "
                  f"{run['speedup']:8.2f} {run['efficiency']:10.2f}")
    return {"quick": args.quick, "threads_per_rank": 1, "cores": len(os.sched_getaffinity(0)), **results}


def main(argv=None) -> int:
    parser = _harness.parser(__doc__, threads=None, rounds=3)
    parser.add_argument("--quick", action="store_true", help="fewer examples (a few minutes)")
    parser.add_argument("--parts", default="scaling,collectives,heterogeneous",
                        help="comma-separated subset of scaling,collectives,heterogeneous")
    parser.add_argument("--random-draws", type=int, default=3, help="random placements in the heterogeneous part")
    parser.add_argument("--collectives", type=Path, help=argparse.SUPPRESS)  # internal: rank 0's report file
    parser.add_argument("--cpus", help=argparse.SUPPRESS)  # internal: the rank of local rank r takes the r-th
    args = parser.parse_args(argv)
    if args.collectives:
        return run_collectives(args.collectives, args.cpus)
    return _harness.main(measure, args)


if __name__ == "__main__":
    sys.exit(main())
