"""The compiled MDLSTM scan's matrix products: OpenBLAS against Eigen, both in one run.

Usage::

    python benchmarks/scan_gemm.py [--rounds 3] [--repeats 10] [--configs L1,L2,L3,L4]
                                   [--presets small,large] [--out res.json]

The two builds of the kernel (``TFNHR_KERNEL_GEMM=openblas`` and ``eigen``,
:mod:`tfnhr.ops.scan_kernel`) register the same ops, so one process can load only one of them.
Each round therefore runs one child process per library, in alternating order (Eigen first in
odd rounds), each pinned to one core (the first this process may use) with one TensorFlow
thread and the tuned environment of ``mdlstm_speed.py``. A child measures, in this order:

* the single-thread matmul peak (a 1024 x 1024 float32 ``tf.matmul``, best of 10);
* for each layer of ``mdlstm_speed.CONFIGS``: forward + backward of one 4-directional Leaky-LP
  ``MDLSTM2D`` (compiled scan, in-loop input projection), the median of ``--repeats`` calls, as
  milliseconds, million cell updates per second and a share of that child's matmul peak (FLOPs
  counted as in ``mdlstm_speed.py``);
* for each preset: whole training steps of the recognizer (``training_throughput.compiled_step``:
  2x2 blocks, the main job's line height, Adam), on the same ``--repeats`` 150,000-px batches of
  synthetic lines in every child (no augmentation, so that both libraries see the same pixels),
  the median step.

The report gives, for every measurement, the median over rounds of the children's medians, its
range, and Eigen / OpenBLAS (above 1: OpenBLAS is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import _harness

LIBRARIES = ("eigen", "openblas")
BATCH_PIXELS = 150_000


def _layer_times(tf, names: list[str], repeats: int, peak: float) -> dict:
    import mdlstm_speed

    results = {}
    for name in names:
        batch, height, width, channels, units = mdlstm_speed.CONFIGS[name]
        layer = mdlstm_speed._make_layer(tf, channels, units, input_projection="in_loop",
                                         **mdlstm_speed._scan_kwargs("compiled"))
        step = mdlstm_speed._training_step(tf, layer, tf.random.normal((batch, height, width, channels)))
        step()
        seconds = statistics.median(_harness.timed(step)[1] for _ in range(repeats))
        flops = _harness.scan_flops(units, channels, batch * height * width)
        results[name] = {"ms": seconds * 1e3, "cell_updates_per_s": batch * 4 * height * width / seconds,
                         "share_of_peak": flops / seconds / 1e9 / peak}
    return results


def _step_times(tf, presets: list[str], repeats: int, seed: int) -> dict:
    import training_throughput

    from tfnhr.charset import Charset
    from tfnhr.data.dataset import make_dataset

    data = training_throughput.synthetic_lines(330, seed)
    charset = Charset.from_texts(data.texts)
    batches = list(make_dataset(data, charset, BATCH_PIXELS, seed=seed).take(repeats + 1))
    results = {}
    for preset in presets:
        _, step = training_throughput.compiled_step(tf, preset, charset, seed)
        training_throughput.train_on(step, batches[0])
        seconds = [_harness.timed(training_throughput.train_on, step, batch)[1] for batch in batches[1:]]
        lines = sum(int(batch[0].shape[0]) for batch in batches[1:])
        results[preset] = {"ms": statistics.median(seconds) * 1e3, "lines_per_s": lines / sum(seconds)}
    return results


def child(args: argparse.Namespace) -> dict:
    """One library's figures in this process (``TFNHR_KERNEL_GEMM`` set by the parent)."""
    tf = _harness.set_threads(1)

    from tfnhr.ops import scan_kernel

    scan_kernel.scan_ops()
    peak = _harness.matmul_peak_gflops(tf)
    return {"library": scan_kernel.gemm_library(), "matmul_peak_gflops": peak,
            "layers": _layer_times(tf, args.configs.split(","), args.repeats, peak),
            "steps": _step_times(tf, [p for p in args.presets.split(",") if p], args.repeats, args.seed)}


def _summary(runs: dict[str, list[dict]], path: tuple[str, str, str]) -> dict:
    """Median and range over rounds of one figure, per library, and Eigen / OpenBLAS."""
    group, name, figure = path
    sides = {library: _harness.spread([run[group][name][figure] for run in runs[library]]) for library in LIBRARIES}
    sides["eigen_over_openblas"] = sides["eigen"]["median"] / sides["openblas"]["median"]
    return sides


def measure(args: argparse.Namespace) -> dict:
    allowed = os.sched_getaffinity(0)
    core = min(allowed)
    runs: dict[str, list[dict]] = {library: [] for library in LIBRARIES}
    child_args = ["--child", "--repeats", str(args.repeats), "--configs", args.configs,
                  "--presets", args.presets, "--seed", str(args.seed)]
    for round_number in range(args.rounds):
        order = LIBRARIES if round_number % 2 == 0 else LIBRARIES[::-1]
        for library in order:
            _harness.log(f"round {round_number + 1}/{args.rounds}: {library} (core {core})")
            env = {**_harness.single_threaded_child_env(), **_harness.TUNED_ENV, "TFNHR_KERNEL_GEMM": library}
            os.sched_setaffinity(0, {core})  # the child inherits it
            try:
                runs[library].append(_harness.run_child(__file__, child_args, env))
            finally:
                os.sched_setaffinity(0, allowed)
    report = {"core": core, "rounds": args.rounds, "repeats": args.repeats, "runs": runs,
              "matmul_peak_gflops": {lib: _harness.spread([r["matmul_peak_gflops"] for r in runs[lib]])
                                     for lib in LIBRARIES},
              "layers": {name: {figure: _summary(runs, ("layers", name, figure))
                                for figure in ("ms", "cell_updates_per_s", "share_of_peak")}
                         for name in args.configs.split(",")},
              "steps": {preset: {figure: _summary(runs, ("steps", preset, figure)) for figure in ("ms", "lines_per_s")}
                        for preset in args.presets.split(",") if preset}}
    _print(report)
    return report


def _print(report: dict) -> None:
    peaks = report["matmul_peak_gflops"]
    print(f"one thread on core {report['core']}, {report['rounds']} rounds of one child per library, "
          f"medians of {report['repeats']} calls; matmul peak eigen-child {peaks['eigen']['median']:.1f}, "
          f"openblas-child {peaks['openblas']['median']:.1f} GFLOP/s")
    print("MDLSTM2D forward + backward, ms (range over rounds); share of the matmul peak")
    for name, figures in report["layers"].items():
        ms, share = figures["ms"], figures["share_of_peak"]
        print(f"  {name}: eigen {ms['eigen']['median']:7.1f} ({ms['eigen']['min']:.1f}-{ms['eigen']['max']:.1f}) "
              f"{100 * share['eigen']['median']:4.1f} % | openblas {ms['openblas']['median']:7.1f} "
              f"({ms['openblas']['min']:.1f}-{ms['openblas']['max']:.1f}) {100 * share['openblas']['median']:4.1f} % "
              f"| eigen / openblas {ms['eigen_over_openblas']:.2f}x")
    for preset, figures in report["steps"].items():
        ms, rate = figures["ms"], figures["lines_per_s"]
        print(f"  {preset} training step: eigen {ms['eigen']['median']:.0f} ms ({rate['eigen']['median']:.1f} lines/s) | "
              f"openblas {ms['openblas']['median']:.0f} ms ({rate['openblas']['median']:.1f} lines/s) "
              f"| {ms['eigen_over_openblas']:.2f}x")


def main(argv=None) -> int:
    parser = _harness.parser(__doc__, rounds=3, threads=None)
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per figure in each child")
    parser.add_argument("--configs", default="L1,L2,L3,L4", help="comma-separated MDLSTM layers of mdlstm_speed.py")
    parser.add_argument("--presets", default="small,large", help="comma-separated recognizer presets ('' for none)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return 0
    return _harness.main(measure, args)


if __name__ == "__main__":
    sys.exit(main())
