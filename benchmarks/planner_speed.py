"""Packing planner speed: the NumPy reference planner against the same planner in TensorFlow ops, plain and XLA-compiled, on word-like and line-like batches, in one run.

For each batch kind (``words``: 200 IAM-like word sizes, 20-70 px high and 15-250 px wide, the seed
paper's batch; ``lines``: 11 lines at 32 px, 150-700 px wide, about a main-job batch) the
three planners run interleaved, ``--rounds`` calls each after a warm-up call:

* ``numpy``: :func:`tfnhr.ops.packing.plan_packing` on Python size lists (what ``tf.numpy_function``
  runs inside a graph, without its hand-over cost);
* ``graph``: :func:`tfnhr.ops.graph_planner.plan_packing_graph` in a ``tf.function`` (what an export runs);
* ``xla``: the same with ``jit=True`` (what training runs by default); its first call's
  compilation time is reported separately.

All three give the same placements (checked here too). Figures: median and range of the call's
wall milliseconds, and the ratios to ``numpy``. Pin to one core for stable figures::

    taskset -c 0 .venv/bin/python benchmarks/planner_speed.py --rounds 30
"""

from __future__ import annotations

import statistics
import sys

import numpy as np

import _harness

KINDS = {"words": (200, (20, 71), (15, 251)), "lines": (11, (32, 33), (150, 701))}
"""Batch kind: (examples, height range, width range), ranges half-open, sizes drawn uniformly."""


def measure(args) -> dict:
    tf = _harness.set_threads(args.threads)
    from tfnhr.ops.graph_planner import plan_packing_graph
    from tfnhr.ops.packing import plan_packing

    graph = tf.function(lambda heights, widths: plan_packing_graph(heights, widths))
    xla = tf.function(lambda heights, widths: plan_packing_graph(heights, widths, jit=True))
    rng = np.random.default_rng(args.seed)
    report = {"threads": args.threads, "rounds": args.rounds, "kinds": {}}
    for kind, (count, height_range, width_range) in KINDS.items():
        heights, widths = rng.integers(*height_range, count), rng.integers(*width_range, count)
        sizes = list(zip(heights.tolist(), widths.tolist()))
        tensors = tf.constant(heights), tf.constant(widths)
        _, compile_seconds, _ = _harness.timed(lambda: xla(*tensors).canvas_shape.numpy())
        reference = plan_packing(sizes)
        for planner in (graph, xla):
            placed = planner(*tensors)
            assert np.array_equal(placed.x.numpy(), [p.x for p in reference.placements]), "planners disagree"
            assert np.array_equal(placed.canvas.numpy(), [p.canvas for p in reference.placements]), "planners disagree"
        steps = {"numpy": lambda: plan_packing(sizes),
                 "graph": lambda: graph(*tensors).canvas_shape.numpy(),
                 "xla": lambda: xla(*tensors).canvas_shape.numpy()}
        times = _harness.interleaved(steps, rounds=args.rounds, warmup=1)
        result = {name: {"median_ms": 1e3 * statistics.median(t.wall), "min_ms": 1e3 * min(t.wall),
                         "max_ms": 1e3 * max(t.wall)} for name, t in times.items()}
        result["xla_first_call_seconds"] = compile_seconds
        report["kinds"][kind] = result
        print(f"\n{kind}: {count} examples; planner call, wall ms (median, range of {args.rounds})")
        for name in steps:
            r = result[name]
            print(f"  {name:6s} {r['median_ms']:8.2f} ({r['min_ms']:.2f}-{r['max_ms']:.2f})")
        for name in ("graph", "xla"):
            print(f"  {name} / numpy: {result[name]['median_ms']:.2f} / {result['numpy']['median_ms']:.2f} = "
                  f"{result[name]['median_ms'] / result['numpy']['median_ms']:.2f}x")
        print(f"  xla first call (tracing + compilation): {compile_seconds:.2f} s")
    return report


def main(argv=None) -> int:
    parser = _harness.parser(__doc__, rounds=30)
    parser.add_argument("--seed", type=int, default=0)
    return _harness.main(measure, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
