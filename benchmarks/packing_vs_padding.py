"""Example packing vs last-minute batch padding (LMBR) for a 4-directional Leaky-LP MDLSTM2D.

Wenniger et al. 2019 ("No Padding Please", §V and §VII-C, Table IV): on two GPUs, packing trained
IAM words 6.6x and IAM lines 1.45x faster (examples/s) than LMBR, at equal peak GPU memory (batch
200 vs 20 for words, 12 vs 8 for lines). This script measures the same comparison on this
project's CPU for one ``MDLSTM2D(units=4, cell="leaky_lp", directions=4)`` layer fed ragged
input, ``packing="examples"`` against ``packing="pad"``.

Usage::

    python benchmarks/packing_vs_padding.py [--quick] [--threads 1] [--seed 0] [--out res.json]

Without ``--out`` the JSON goes to stdout after the table (the table then goes to stderr).

Size distributions (IAM-like, written down in :func:`word_sizes` / :func:`line_sizes`)
------------------------------------------------------------------------------------------

Both are generated at IAM's scanning resolution from the IAM facts (word images ~30-150 px tall
and 20-700 px wide with a long tail; line images ~40-150 px tall with moderate variance and
1000-2000+ px wide) and then scaled by ``SCALE = 1/4`` (rounded, at least 1 px):

* **words**: a token of ``n`` characters, ``n`` drawn from an English token-length distribution
  that counts IAM's punctuation tokens (``WORD_LENGTH_P``: 1-14 characters, mean ~4.3);
  width ``= 10 + 38 n`` px times a log-normal factor (sigma 0.25), clipped to 20-700 px;
  height ``= 42`` px (x-height plus margins) times ``1.45`` if the token has an ascender (prob.
  ``1 - 0.72^n``) and times ``1.45`` if it has a descender (prob. ``1 - 0.86^n``), times a
  log-normal factor (sigma 0.12), clipped to 30-150 px. Scaled: heights 8-38 px (8-34 in a
  16k pool, median 16), widths 5-175 px (median 35, mean 42, long right tail); height
  bimodal-ish (tokens with / without ascenders and descenders). Check: LMBR at batch 20 pads
  75 % of its (unskewed) pixels, the "about 75 %" of Wenniger et al. 2019 for IAM words.
* **lines**: height ``N(115, 18)`` px clipped to 40-150 (scaled 10-38, mean ~29);
  width: 85 % full lines ``N(1750, 180)`` px, 15 % paragraph-final lines ``U(1000, 1600)`` px,
  clipped to 1000-2400 (scaled 250-600, mean ~430).

Why 1/4: an MDLSTM layer of the network of Wenniger et al. 2019 (Pham et al.'s structure) never
sees the scan at
full resolution (the first one after a 2x2 input block, later ones after further block-strided
convolutions), and at 1/4 a 4-directional training step on one line (~29 x 430 px) costs
~50 ms on one core, so the whole benchmark fits a few CPU minutes. One factor for both
distributions keeps every aspect ratio, hence the padding geometry and the skew-triangle share
``(H - 1) / (W + H - 1)`` of each scan, as at full resolution (up to the ``- 1``). What does
not scale: packing's one-pixel separators cost 4x more at 1/4 (a separator row is ~6 % of a
16 px row of words, ~1.5 % at full resolution), and the per-column overhead is paid over 4x
fewer columns.

Measurements
------------

1. **Waste factor** = computed cells / valid cells over the *skewed* grid, summed over all
   batches of one pass over a fixed pool of example sizes: packing ``R * Hc * (Wc + Hc - 1)``
   (``plan_packing(sizes).computed_cells()``), LMBR ``B * Hmax * (Wmax + Hmax - 1)``
   (``plan_padding``); valid ``sum(H_i * W_i)``. Also reported: the plain (unskewed) padding
   share of LMBR, comparable to "about 75 % of the input pixels is padding" for words in
   Wenniger et al. 2019.
2. **Equal activation-memory budget.** ``tf.config.experimental.get_memory_info('CPU:0')`` does
   not work on CPU (TF 2.18: ``ValueError: Allocator stats not available for device
   'CPU:0'``), so peak memory is measured as peak RSS growth of a fresh subprocess per
   candidate batch size: ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` after the training steps
   minus ``ru_maxrss`` after TF import, layer build and tracing the training step on a tiny
   batch (the fixed cost every batch size pays). The steps measured are the *two worst batches
   of an epoch* over the pool (largest computed-cell count for that mode at that batch size):
   as Wenniger et al. 2019 stress, the worst batch decides which batch size fits, not the
   average one. The budget: ``--budget-mb`` if given, else 1.05 x the measured peak of LMBR at
   the LMBR batch size of Wenniger et al. 2019 (20 words, 8 lines; quick: 8, 4), i.e. "the
   memory LMBR needed at the batch size the paper could afford". For each mode the largest batch of a sorted candidate
   list whose peak fits is found by a bracketing search (next probe predicted from the
   measured bytes per computed cell).
3. **Training throughput**: examples/s of forward + backward (gradients of ``sum(outputs)``
   with respect to all layer weights, no optimizer) inside one ``tf.function`` with a ragged
   ``input_signature`` (no retracing), on the first whole batches of the same pool order for
   both modes (both modes see the same example sizes: 1536 words / 160 lines each). One
   process times both modes (two layers with the same weights), alternating LMBR and packed
   steps so that other load on shared cores hits both alike; one untimed warm-up step per
   mode and batch size. Wall time per step, process CPU time alongside (wall >> CPU: the
   cores were shared; the table warns). Also timed: both modes at equal batch sizes (the
   "sweep", memory ignored) and single-example steps (for the fit below).
4. **Physics**: ``step CPU time ~ c_mode + a * columns + b * computed cell-directions`` is
   fitted (non-negative least squares, relative residuals) to every timed step of both modes
   (``columns = Wc + Hc - 1`` skewed columns of the scan, ``cell-directions = 4 * computed
   cells``): ``a`` is the per-column overhead (op dispatch of the while loop and its
   hand-written backward), ``b`` the per-cell cost, ``c_mode`` the fixed per-step cost (planning,
   pack / pad). On a GPU a column's cells run in parallel, so until the device saturates
   ``time ~ a * columns`` and throughput grows with the batch that fits (Wenniger et al.
   2019: 10x the batch, 6.6x the speed for words); the "latency-bound projection" in the JSON is that ratio of
   examples per column. On one CPU core ``b * cells`` is ~90 % of a step at these batch sizes,
   so the speed-up is about the ratio of waste factors ("throughput-bound projection"), not of
   batch sizes; ``notes`` in the JSON spell this out with the run's figures.

Findings (two full runs, ``--threads 1``, 2 shared vCPUs AVX2, TF 2.18 CPU; ~3 min each)
---------------------------------------------------------------------------------------

Absolute examples/s moved by up to +-30 % between runs (other processes on the two vCPUs);
the pack / LMBR ratios, measured interleaved in one process, moved by < 0.1. These runs used the
TensorFlow-ops scan and exact-height rows; the figures with the compiled scan and
``--height-step 4`` are in docs/results.md#packing-vs-padding.

* **words: 2.2-2.3x** (GPUs in Wenniger et al. 2019: 6.6x). Equal budget ~190 MB -> LMBR batch
  20, packing batch 48 (2.4x; the paper 10x). Waste at those batches: LMBR 4.8 (canvas fill 25 %, skew 1.22),
  packing 2.25 (fill 55 %, skew 1.26). Fit: ~0.43 us per computed cell-direction, plus a
  per-column overhead of 0.07-0.19 ms (its split with the ~0-5 ms per-step cost is not stable
  between runs); cells are 80-90 % of a step in both modes, so the measured ratio is the waste
  ratio (2.1x; model 2.1x). Even a latency-bound device would gain only ~2.0x at these batch
  sizes (examples per scan column 0.29 vs 0.14). Why the batch ratio is 2.4x and not 10x: peak
  memory is ~1.5 KB per computed cell of the *worst* batch in both modes; LMBR's worst batch
  of 20 costs 6.3k cells per example (8.4x the mean pixels), but packing's worst batch of 48
  still 2.3k (3.1x): rows hold one exact height, and a batch of 48 words has ~17 distinct
  heights, ~3 words per height, so packed rows and canvases stay half empty. Packing reaches
  low waste only at large batches (1.70 at 200, 1.52 at 512). At equal batch sizes (memory
  ignored) packing's lead grows with the batch: 1.1x at 8, 1.6-1.7x at 20, 2.9x at 64,
  5.3-5.9x at 200: LMBR's waste rises (3.6 -> 7.0) and at 6000 scan rows its per-cell cost
  too, packing's waste falls (2.8 -> 1.7). LMBR's examples/s is flat to falling with the batch
  (most at 8-64), packing's rises (most at 200): 2.6-3.4x best against best.
* **lines: 1.0x** (1.01-1.04x; GPUs in Wenniger et al. 2019: 1.45x). Packing does not reduce the waste of these
  lines (1.52 vs 1.53 at batch 8; worst batch 192.7k vs 193.6k cells), so the budget admits
  batch 8 for both. A line is too wide to share a row with another (rows hold one exact height
  and lines are 250-600 px wide), so every packed row is one line, the canvas is as wide as
  the widest line (the same width slack as LMBR), and stacking rows of different heights into
  canvases of up to 2x the tallest line trades LMBR's height padding for canvas slack and a
  bigger skew triangle (fill 71 % vs 70 %, skew 1.08 vs 1.07). With this distribution's
  moderate height spread (sd 18 px at full resolution) there is little height padding to win
  back; the paper's 1.45x (batch 12 vs 8) needs a larger worst-case height spread than
  modelled here.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import tempfile
import time

import _harness
import numpy as np

SCALE = 0.25
"""Linear scale applied to IAM-resolution sizes (see the module docstring)."""

WORD_LENGTH_P = np.array([0.17, 0.16, 0.19, 0.15, 0.10, 0.07, 0.05, 0.04, 0.03, 0.02, 0.012,
                          0.008, 0.005, 0.005])
"""P(token has n characters), n = 1..14: English running text with punctuation tokens."""
WORD_LENGTH_P = WORD_LENGTH_P / WORD_LENGTH_P.sum()

UNITS = 4
CHANNELS = 1
DIRECTIONS = 4

SETTINGS = {
    # pool: example sizes drawn once; ref: the LMBR batch size of Wenniger et al. 2019 (sets the
    # auto budget);
    # candidates: batch sizes searched; waste_batches: batch sizes of the waste table;
    # timed: examples timed per mode at the budget's batch sizes (whole batches, >= 2);
    # sweep: both modes also timed at these equal batch sizes, sweep_examples each.
    "full": {
        "words": dict(pool=16384, ref=20, timed=1536, sweep=[8, 20, 64, 200],
                      sweep_examples=400,
                      candidates=[4, 8, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192,
                                  256, 320, 384, 512, 640, 768, 1024],
                      waste_batches=[8, 20, 48, 64, 200, 512]),
        "lines": dict(pool=2048, ref=8, timed=160, sweep=[4, 8, 16], sweep_examples=48,
                      candidates=[2, 3, 4, 5, 6, 8, 10, 12, 14, 16, 20, 24, 32, 40, 48, 64],
                      waste_batches=[4, 8, 12, 32, 64]),
    },
    "quick": {
        "words": dict(pool=1024, ref=8, timed=128, sweep=[], sweep_examples=0,
                      candidates=[4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256],
                      waste_batches=[8, 20, 64, 200]),
        "lines": dict(pool=128, ref=4, timed=16, sweep=[], sweep_examples=0,
                      candidates=[2, 3, 4, 6, 8, 12, 16, 24, 32],
                      waste_batches=[4, 8, 12, 32]),
    },
}

CALIBRATION_QUANTILES = (0.0, 0.25, 0.5, 0.75, 0.9, 1.0)
"""Single-example steps (pool examples at these width quantiles) timed next to every timed
batch: many columns, few cells, which separates per-column from per-cell cost in the fit."""

QUICK_PREDICTION_MARGIN = 1.15
"""--quick only: a candidate next to a measured fit whose predicted peak exceeds the budget by
more than this factor is taken as not fitting without a probe (marked ``predicted``)."""

BUDGET_HEADROOM = 1.05
"""Auto budget = this x LMBR's measured peak at the reference batch (RSS measurement noise)."""

PAPER = "Wenniger et al. 2019"
"""The paper this benchmark follows, as it is cited in the output."""

DEFAULT_BYTES_PER_CELL = 1000.0
"""First guess of peak bytes per computed (skewed) cell, 4 directions x 4 units (refined by
every probe)."""

PAPER_GPU = {"words": {"batch_pad": 20, "batch_pack": 200, "speedup": 16.1 / 2.38},
             "lines": {"batch_pad": 8, "batch_pack": 12, "speedup": 0.355 / 0.243}}
"""Wenniger et al. 2019, Table IV (two GPUs, whole network): batch sizes and examples/s ratio
(JSON key ``seed_gpu``)."""


# --------------------------------------------------------------------------- distributions


def _scale(pixels: np.ndarray) -> np.ndarray:
    return np.maximum(1, np.rint(pixels * SCALE)).astype(np.int64)


def word_sizes(count: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """IAM-like word image sizes ``[(H, W)]`` at ``SCALE`` (module docstring: how and why)."""
    chars = rng.choice(np.arange(1, len(WORD_LENGTH_P) + 1), size=count, p=WORD_LENGTH_P)
    width = (10 + 38 * chars) * rng.lognormal(0.0, 0.25, count)
    ascender = rng.random(count) < 1 - 0.72 ** chars
    descender = rng.random(count) < 1 - 0.86 ** chars
    height = 42 * np.where(ascender, 1.45, 1.0) * np.where(descender, 1.45, 1.0)
    height = height * rng.lognormal(0.0, 0.12, count)
    heights = _scale(np.clip(height, 30, 150))
    widths = _scale(np.clip(width, 20, 700))
    return list(zip(heights.tolist(), widths.tolist()))


def line_sizes(count: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """IAM-like text-line image sizes ``[(H, W)]`` at ``SCALE`` (module docstring)."""
    height = np.clip(rng.normal(115, 18, count), 40, 150)
    final = rng.random(count) < 0.15
    width = np.where(final, rng.uniform(1000, 1600, count), rng.normal(1750, 180, count))
    width = np.clip(width, 1000, 2400)
    return list(zip(_scale(height).tolist(), _scale(width).tolist()))


DISTRIBUTIONS = {"words": word_sizes, "lines": line_sizes}


# --------------------------------------------------------------------------- layouts


def _batches(pool: list[tuple[int, int]], batch: int) -> list[list[tuple[int, int]]]:
    """One pass over the pool in its (random) order, whole batches only."""
    return [pool[k:k + batch] for k in range(0, len(pool) - batch + 1, batch)]


def layout_stats(sizes: list[tuple[int, int]], mode: str, height_step: int = 1) -> dict:
    """Cells, scan columns and canvas shape of one batch laid out by ``mode`` (``height_step``:
    :func:`~tfnhr.ops.packing.plan_packing`'s, for packing)."""
    from tfnhr.ops.packing import plan_packing, plan_padding  # imports TF (parent only)

    layout = (plan_packing(sizes, height_step=height_step) if mode == "examples"
              else plan_padding(sizes))
    r, hc, wc = layout.num_canvases, layout.canvas_height, layout.canvas_width
    return {"valid": layout.valid_cells(), "computed": layout.computed_cells(),
            "columns": wc + hc - 1, "canvases": r, "canvas_h": hc, "canvas_w": wc,
            "pixels": r * hc * wc}


def waste_table(pool: list[tuple[int, int]], batch_sizes: list[int], stats_fn=None
                ) -> list[dict]:
    """Waste factors of both modes at each batch size over one pass over the pool."""
    if stats_fn is None:
        def stats_fn(pool, mode, batch):
            return [layout_stats(b, mode) for b in _batches(pool, batch)]
    rows = []
    for batch in batch_sizes:
        batches = _batches(pool, batch)
        if not batches:
            continue
        row = {"batch": batch, "batches": len(batches)}
        for mode, key in (("pad", "pad"), ("examples", "pack")):
            stats = stats_fn(pool, mode, batch)
            valid = sum(s["valid"] for s in stats)
            row[f"waste_{key}"] = sum(s["computed"] for s in stats) / valid
            row[f"worst_batch_cells_{key}"] = max(s["computed"] for s in stats)
            row[f"mean_columns_{key}"] = float(np.mean([s["columns"] for s in stats]))
            pixels = sum(s["pixels"] for s in stats)
            # waste = (pixels / valid) x (computed / pixels): canvas fill x skew triangle
            row[f"fill_{key}"] = valid / pixels
            row[f"skew_factor_{key}"] = sum(s["computed"] for s in stats) / pixels
            if mode == "pad":
                row["pad_pixel_share"] = 1 - valid / pixels
            else:
                row["mean_canvases"] = float(np.mean([s["canvases"] for s in stats]))
        row["waste_ratio"] = row["waste_pad"] / row["waste_pack"]
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- worker


def _ragged(sizes, rng):
    import tensorflow as tf

    heights = np.array([h for h, _ in sizes], np.int64)
    widths = np.array([w for _, w in sizes], np.int64)
    values = rng.uniform(-1, 1, size=(int((heights * widths).sum()), CHANNELS)).astype(np.float32)
    return tf.RaggedTensor.from_nested_row_lengths(
        values, [heights, np.repeat(widths, heights)], validate=False)


def worker(task: dict) -> dict:
    """Runs in a fresh process. ``task["kind"]``:

    * ``"memory"``: one mode; build, trace the step on a tiny batch, take ``ru_maxrss`` as the
      baseline, run the memory batches; returns the peak growth in MiB.
    * ``"time"``: both modes (two layers with the same weights); every timed set alternates
      LMBR and packed steps so that load changes on shared cores hit both alike; then the
      single-example calibration steps (min of 4 runs each).
    """
    tf = _harness.set_threads(task["threads"])
    from tfnhr.layers.mdlstm import MDLSTM2D
    from tfnhr.ops import packing as ops

    rng = np.random.default_rng(task["seed"])
    via_ops = task["via"] == "ops"
    spec = tf.RaggedTensorSpec([None, None, None, CHANNELS], tf.float32, ragged_rank=2,
                               row_splits_dtype=tf.int64)
    tiny = _ragged([(2, 3), (3, 2)], rng)

    def make_step(mode, weights=None):
        layer = MDLSTM2D(UNITS, cell="leaky_lp", directions=DIRECTIONS, packing=mode,
                         packing_height_step=task.get("height_step", 1),
                         **({"jit_compile": False} if via_ops else {}))

        def forward(x):
            if not via_ops:
                return layer(x, training=True)
            if mode == "examples":
                canvas, mask, indices = ops.pack_ragged_graph(
                    x, height_step=task.get("height_step", 1))
                return ops.unpack(layer(canvas, mask=mask, training=True), indices)
            padded, mask = ops.pad_batch(x)
            return ops.unpad_batch(layer(padded, mask=mask, training=True),
                                   ops.image_sizes_tensor(x))

        @tf.function(input_signature=[spec])
        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(forward(x).flat_values)
            grads = tape.gradient(loss, layer.trainable_variables)
            return loss + tf.add_n([tf.reduce_sum(g) for g in grads]) * 0.0

        forward(tiny)  # build the weights eagerly
        if weights is not None:
            layer.set_weights(weights)
        t0 = time.perf_counter()
        step(tiny).numpy()  # trace
        return step, layer, time.perf_counter() - t0

    def timed(step, x):
        _, wall, cpu = _harness.timed(lambda: step(x).numpy())
        return wall, cpu

    if task["kind"] == "memory":
        step, _, trace_s = make_step(task["mode"])
        inputs = [_ragged(b, rng) for b in task["memory_batches"]]
        base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        step_s = [timed(step, x)[0] for x in inputs]
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return {"baseline_mb": base_kb / 1024, "peak_mb": (peak_kb - base_kb) / 1024,
                "trace_s": trace_s, "memory_step_s": step_s}

    steps = {}
    steps["pad"], layer, trace_pad = make_step("pad")
    steps["examples"], _, trace_pack = make_step("examples", layer.get_weights())
    result = {"trace_s": {"pad": trace_pad, "pack": trace_pack}, "sets": []}
    for timed_set in task["sets"]:
        inputs = {mode: [_ragged(b, rng) for b in timed_set[mode]["batches"]]
                  for mode in ("pad", "examples")}
        for mode in ("pad", "examples"):  # one untimed warm-up step at this batch size
            steps[mode](inputs[mode][0]).numpy()
        out = {mode: {"wall_s": [], "cpu_s": []} for mode in ("pad", "examples")}
        for i in range(max(len(v) for v in inputs.values())):
            for mode in ("pad", "examples"):
                if i < len(inputs[mode]):
                    wall, cpu = timed(steps[mode], inputs[mode][i])
                    out[mode]["wall_s"].append(wall)
                    out[mode]["cpu_s"].append(cpu)
        result["sets"].append(out)
    calibration = {mode: {"wall_s": [], "cpu_s": []} for mode in ("pad", "examples")}
    for sizes in task["calibration_batches"]:
        x = _ragged(sizes, rng)
        for mode in ("pad", "examples"):
            wall, cpu = min(timed(steps[mode], x) for _ in range(4))
            calibration[mode]["wall_s"].append(wall)
            calibration[mode]["cpu_s"].append(cpu)
    result["calibration"] = calibration
    return result


def run_worker(task: dict) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "task.json")
        with open(path, "w") as f:
            json.dump(task, f)
        return _harness.run_child(__file__, ["--worker", path], dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


# --------------------------------------------------------------------------- orchestration

MODE_KEYS = {"pad": "pad", "examples": "pack"}
"""MDLSTM2D ``packing`` value -> result key."""


class Bench:
    def __init__(self, args):
        self.args = args
        self._stats = {}

    def stats(self, pool, mode, batch):
        """Layout stats of every batch of one pass over ``pool`` (cached)."""
        key = (id(pool), mode, batch)
        if key not in self._stats:
            self._stats[key] = [layout_stats(b, mode, self.args.height_step)
                                for b in _batches(pool, batch)]
        return self._stats[key]

    def task(self, kind: str, **fields) -> dict:
        return {"kind": kind, "threads": self.args.threads, "seed": self.args.seed,
                "via": self.args.via, "height_step": self.args.height_step, **fields}

    def probe(self, dist, pool, mode, batch):
        """Peak RSS growth of one step on each of the two worst batches of an epoch."""
        batches = _batches(pool, batch)
        stats = self.stats(pool, mode, batch)
        worst = sorted(range(len(batches)), key=lambda k: -stats[k]["computed"])[:2]
        t0 = time.perf_counter()
        out = run_worker(self.task("memory", mode=mode,
                                   memory_batches=[batches[k] for k in worst]))
        out.update(mode=mode, batch=batch, wall_s=time.perf_counter() - t0,
                   worst_batch_cells=stats[worst[0]]["computed"],
                   bytes_per_cell=out["peak_mb"] * 2**20 / stats[worst[0]]["computed"])
        _harness.log(f"  {dist:5s} {mode:8s} B={batch:<5d} peak {out['peak_mb']:7.1f} MB "
                     f"(worst batch {out['worst_batch_cells']} cells, "
                     f"{out['bytes_per_cell']:.0f} B/cell)  [{out['wall_s']:.0f} s]")
        return out

    def search(self, dist, pool, mode, candidates, budget_mb, known=(),
               bytes_per_cell=DEFAULT_BYTES_PER_CELL):
        """Largest candidate whose worst-batch peak fits ``budget_mb`` (None if none does).

        ``known``: probes already made for this mode; ``bytes_per_cell``: prior for predicting
        the next probe (peak bytes per computed cell of the worst batch).
        """
        candidates = [c for c in candidates if _batches(pool, c)]
        probes = {p["batch"]: p for p in known}
        if known:
            bytes_per_cell = known[-1]["bytes_per_cell"]

        def worst_cells(c):
            return max(s["computed"] for s in self.stats(pool, mode, c))

        lo, hi = -1, len(candidates)
        for index, c in enumerate(candidates):
            if c in probes:
                if probes[c]["peak_mb"] <= budget_mb:
                    lo = max(lo, index)
                else:
                    hi = min(hi, index)
        while hi - lo > 1:
            index = lo + 1  # the largest candidate predicted to fit, within the bracket
            while (index + 1 < hi
                   and worst_cells(candidates[index + 1]) * bytes_per_cell / 2**20 <= budget_mb):
                index += 1
            predicted_mb = worst_cells(candidates[index]) * bytes_per_cell / 2**20
            if (self.args.quick and lo >= 0 and index == lo + 1
                    and predicted_mb > QUICK_PREDICTION_MARGIN * budget_mb):
                # --quick: a clear predicted misfit next to a measured fit closes the bracket
                probes[candidates[index]] = {"batch": candidates[index], "mode": mode,
                                             "peak_mb": predicted_mb, "predicted": True,
                                             "bytes_per_cell": bytes_per_cell}
                hi = index
                continue
            p = self.probe(dist, pool, mode, candidates[index])
            probes[candidates[index]] = p
            bytes_per_cell = p["bytes_per_cell"]
            if p["peak_mb"] <= budget_mb:
                lo = index
            else:
                hi = index
        for p in probes.values():
            p["fits"] = p["peak_mb"] <= budget_mb
        return (candidates[lo] if lo >= 0 else None), [probes[c] for c in sorted(probes)]

    def time_modes(self, dist, pool, batch_sets, examples):
        """Interleaved timing of both modes; ``batch_sets``: [(label, B_pad, B_pack)]."""
        sets, meta = [], []
        for label, b_pad, b_pack in batch_sets:
            entry, info = {}, {"label": label}
            for mode, b in (("pad", b_pad), ("examples", b_pack)):
                batches = _batches(pool, b)
                count = min(len(batches), max(2, math.ceil(examples[label] / b)))
                entry[mode] = {"batches": batches[:count]}
                info[mode] = {"batch": b, "stats": self.stats(pool, mode, b)[:count]}
            sets.append(entry)
            meta.append(info)
        by_width = sorted(pool, key=lambda size: (size[1], size[0]))
        singles = [[by_width[round(q * (len(pool) - 1))]] for q in CALIBRATION_QUANTILES]
        t0 = time.perf_counter()
        out = run_worker(self.task("time", sets=sets, calibration_batches=singles))
        for info, measured in zip(meta, out["sets"]):
            for mode in ("pad", "examples"):
                info[mode].update(measured[mode])
                m = info[mode]
                examples_done = m["batch"] * len(m["wall_s"])
                m["examples_per_s"] = examples_done / sum(m["wall_s"])
                m["examples_per_cpu_s"] = examples_done / sum(m["cpu_s"])
                m["timed_examples"] = examples_done
                cell_dirs = DIRECTIONS * sum(st["computed"] for st in m["stats"])
                m["ns_per_cell_dir"] = 1e9 * sum(m["wall_s"]) / cell_dirs
                m["ns_per_cell_dir_cpu"] = 1e9 * sum(m["cpu_s"]) / cell_dirs
                m["wall_over_cpu"] = sum(m["wall_s"]) / sum(m["cpu_s"])
                m["waste"] = (sum(st["computed"] for st in m["stats"])
                              / sum(st["valid"] for st in m["stats"]))
                m["mean_scan_rows"] = float(np.mean([st["canvases"] * (st["canvas_h"] + 1)
                                                     for st in m["stats"]]))
                m["mean_columns"] = float(np.mean([st["columns"] for st in m["stats"]]))
            _harness.log(f"  {dist:5s} timed [{info['label']}] LMBR B={info['pad']['batch']}: "
                         f"{info['pad']['examples_per_s']:.1f} ex/s "
                         f"({info['pad']['examples_per_cpu_s']:.1f}/cpu-s), pack "
                         f"B={info['examples']['batch']}: {info['examples']['examples_per_s']:.1f} "
                         f"ex/s ({info['examples']['examples_per_cpu_s']:.1f}/cpu-s)")
        calibration = {mode: {"stats": [layout_stats(b, mode, self.args.height_step)
                                        for b in singles],
                              **out["calibration"][mode]}
                       for mode in ("pad", "examples")}
        _harness.log(f"  {dist:5s} timing worker {time.perf_counter() - t0:.0f} s")
        return meta, calibration, out["trace_s"]

    def distribution(self, dist: str, settings: dict) -> dict:
        rng = np.random.default_rng([self.args.seed, 1 if dist == "words" else 2])
        pool = DISTRIBUTIONS[dist](settings["pool"], rng)
        heights = np.array([h for h, _ in pool])
        widths = np.array([w for _, w in pool])
        _harness.log(f"{dist}: pool of {len(pool)}: H {heights.min()}-{heights.max()} "
                     f"(mean {heights.mean():.1f}), W {widths.min()}-{widths.max()} "
                     f"(mean {widths.mean():.1f})")
        result = {"pool": {"size": len(pool),
                           "height": _summary(heights), "width": _summary(widths),
                           "pixels": _summary(heights * widths)}}
        result["waste"] = waste_table(pool, settings["waste_batches"], self.stats)
        ref = settings["ref"]
        if self.args.budget_mb is not None:
            budget, known = float(self.args.budget_mb), []
            budget_source = "--budget-mb"
        else:
            ref_probe = self.probe(dist, pool, "pad", ref)
            budget, known = BUDGET_HEADROOM * ref_probe["peak_mb"], [ref_probe]
            budget_source = (f"{BUDGET_HEADROOM} x LMBR peak at the LMBR batch {ref} of {PAPER} "
                             f"({ref_probe['peak_mb']:.1f} MB)")
        result["budget_mb"], result["budget_source"] = budget, budget_source
        _harness.log(f"  budget {budget:.1f} MB ({budget_source})")
        chosen, probes = {}, {}
        bytes_per_cell = known[0]["bytes_per_cell"] if known else DEFAULT_BYTES_PER_CELL
        for mode in ("pad", "examples"):
            batch, probes[mode] = self.search(
                dist, pool, mode, settings["candidates"], budget,
                known=known if mode == "pad" else (), bytes_per_cell=bytes_per_cell)
            bytes_per_cell = probes[mode][-1]["bytes_per_cell"]
            if batch is None:  # nothing fits: time the smallest candidate, flagged
                _harness.log(f"  {dist}: no {mode} candidate fits the budget")
                batch = settings["candidates"][0]
            chosen[mode] = batch
        sets = [("budget", chosen["pad"], chosen["examples"])]
        sets += [(f"B={b}", b, b) for b in settings["sweep"]]
        examples = {"budget": settings["timed"],
                    **{f"B={b}": settings["sweep_examples"] for b in settings["sweep"]}}
        timed_sets, calibration, trace_s = self.time_modes(dist, pool, sets, examples)
        main = timed_sets[0]
        for mode, key in MODE_KEYS.items():
            m = main[mode]
            probe = next((p for p in probes[mode] if p["batch"] == chosen[mode]), None)
            result[key] = {
                "batch": chosen[mode], "fits_budget": bool(probe and probe["fits"]),
                "peak_mb": probe["peak_mb"] if probe else None,
                "examples_per_s": m["examples_per_s"],
                "examples_per_cpu_s": m["examples_per_cpu_s"],
                "timed_examples": m["timed_examples"], "step_wall_s": m["wall_s"],
                "probes": probes[mode], "trace_s": trace_s[key]}
        result["ratio_examples_per_s"] = (result["pack"]["examples_per_s"]
                                          / result["pad"]["examples_per_s"])
        result["ratio_examples_per_cpu_s"] = (result["pack"]["examples_per_cpu_s"]
                                              / result["pad"]["examples_per_cpu_s"])
        result["batch_ratio"] = result["pack"]["batch"] / result["pad"]["batch"]
        summary_keys = ("batch", "examples_per_s", "examples_per_cpu_s", "waste", "mean_columns",
                        "mean_scan_rows", "ns_per_cell_dir", "ns_per_cell_dir_cpu",
                        "wall_over_cpu", "timed_examples")
        result["timed_sets"] = [
            {"label": info["label"],
             **{key: {k: info[mode][k] for k in summary_keys} for mode, key in MODE_KEYS.items()},
             "ratio": info["examples"]["examples_per_s"] / info["pad"]["examples_per_s"],
             "ratio_cpu": (info["examples"]["examples_per_cpu_s"]
                           / info["pad"]["examples_per_cpu_s"])}
            for info in timed_sets]
        result["sweep"] = [
            {"batch": info["pad"]["batch"],
             **{f"examples_per_s_{key}": info[mode]["examples_per_s"]
                for mode, key in MODE_KEYS.items()},
             "ratio": info["examples"]["examples_per_s"] / info["pad"]["examples_per_s"]}
            for info in timed_sets[1:]]
        best = {key: max(timed_sets, key=lambda info: info[mode]["examples_per_s"])[mode]
                for mode, key in MODE_KEYS.items()}
        result["best_vs_best"] = {
            "note": "fastest timed batch size of each mode, memory budget ignored",
            **{f"batch_{key}": best[key]["batch"] for key in best},
            **{f"examples_per_s_{key}": best[key]["examples_per_s"] for key in best},
            "ratio": best["pack"]["examples_per_s"] / best["pad"]["examples_per_s"]}
        for mode, key in MODE_KEYS.items():
            probe = next((p for p in probes[mode] if p["batch"] == chosen[mode]
                          and not p.get("predicted")), None)
            if probe:
                result[key]["worst_batch_cells"] = probe["worst_batch_cells"]
                result[key]["worst_batch_cells_per_example_over_mean_pixels"] = (
                    probe["worst_batch_cells"] / chosen[mode] / result["pool"]["pixels"]["mean"])
        result["max_wall_over_cpu"] = max(info[mode]["wall_over_cpu"] for info in timed_sets
                                          for mode in MODE_KEYS)
        result["physics"] = physics(timed_sets, calibration)
        result["seed_gpu"] = PAPER_GPU[dist]
        return result


def _source_hashes() -> dict:
    """Short SHA-1 of the measured code, to tie a result file to a code version."""
    import hashlib

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = {}
    for path in ("tfnhr/layers/mdlstm.py", "tfnhr/layers/mdlstm_scan.py",
                 "tfnhr/layers/mdlstm_cells.py", "tfnhr/ops/packing.py", "tfnhr/ops/skew.py"):
        try:
            with open(os.path.join(root, path), "rb") as f:
                out[path] = hashlib.sha1(f.read()).hexdigest()[:12]
        except OSError:
            out[path] = None
    return out


def _summary(values: np.ndarray) -> dict:
    return {"min": int(values.min()), "p10": float(np.percentile(values, 10)),
            "median": float(np.median(values)), "mean": float(values.mean()),
            "p90": float(np.percentile(values, 90)), "max": int(values.max())}


def _nonnegative_lstsq(matrix: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Least squares with all coefficients >= 0 (exhaustive over the few active sets)."""
    n = matrix.shape[1]
    best, best_residual = np.zeros(n), float(np.sum(target ** 2))
    for subset in range(1, 2 ** n):
        columns = [j for j in range(n) if subset >> j & 1]
        coef, *_ = np.linalg.lstsq(matrix[:, columns], target, rcond=None)
        if np.all(coef >= 0):
            residual = float(np.sum((matrix[:, columns] @ coef - target) ** 2))
            if residual < best_residual:
                best, best_residual = np.zeros(n), residual
                best[columns] = coef
    return best


def physics(timed_sets: list[dict], calibration: dict) -> dict:
    """Fit ``t = c_mode + a * columns + b * cell-directions`` to every timed step.

    All timed sets (the budget batch sizes and the sweep) and the single-example calibration
    steps (many columns, few cells), both modes together, relative residuals, on process CPU
    time (robust to other processes on shared cores; equal to wall time on an idle machine
    with one thread). ``c_mode``: the fixed per-step cost of the mode (dispatch, planning,
    pack / pad).
    """
    rows, times = [], []
    for mode, j in (("pad", 0), ("examples", 1)):
        groups = [(info[mode]["stats"], info[mode]["cpu_s"]) for info in timed_sets]
        groups.append((calibration[mode]["stats"], calibration[mode]["cpu_s"]))
        for stats, wall in groups:
            for s, t in zip(stats, wall):
                rows.append([j == 0, j == 1, s["columns"], DIRECTIONS * s["computed"]])
                times.append(t)
    matrix, t = np.array(rows, float), np.array(times)
    coef = _nonnegative_lstsq(matrix / t[:, None], np.ones_like(t))
    c_pad, c_pack, a, b = (float(v) for v in coef)
    relative_error = np.abs(matrix @ coef / t - 1)
    out = {"per_step_s": {"pad": c_pad, "pack": c_pack}, "per_column_s": a,
           "per_cell_direction_s": b, "fit_steps": len(t),
           "fit_median_relative_error": float(np.median(relative_error)),
           "fit_max_relative_error": float(np.max(relative_error)), "modes": {}}
    for mode, key in MODE_KEYS.items():
        info = timed_sets[0][mode]
        stats, wall = info["stats"], info["cpu_s"]
        m = {
            "batch": info["batch"],
            "mean_step_cpu_s": float(np.mean(wall)),
            "mean_columns": float(np.mean([s["columns"] for s in stats])),
            "mean_canvases": float(np.mean([s["canvases"] for s in stats])),
            "mean_scan_rows": float(np.mean([s["canvases"] * (s["canvas_h"] + 1)
                                             for s in stats])),
            "mean_computed_cells": float(np.mean([s["computed"] for s in stats])),
            "waste": sum(s["computed"] for s in stats) / sum(s["valid"] for s in stats),
            "computed_cell_dirs_per_cpu_s": DIRECTIONS * sum(s["computed"] for s in stats)
            / sum(wall),
            "valid_cell_dirs_per_cpu_s": DIRECTIONS * sum(s["valid"] for s in stats)
            / sum(wall),
        }
        parts = {"step": out["per_step_s"][key], "columns": a * m["mean_columns"],
                 "cells": b * DIRECTIONS * m["mean_computed_cells"]}
        total = sum(parts.values())
        m["model_step_s"] = total
        m["share"] = {k: v / total for k, v in parts.items()}
        m["examples_per_column"] = m["batch"] / m["mean_columns"]
        out["modes"][key] = m
    pad, pack = out["modes"]["pad"], out["modes"]["pack"]
    out["model_ratio"] = (pack["batch"] / pack["model_step_s"]) / (pad["batch"]
                                                                   / pad["model_step_s"])
    out["latency_bound_projection"] = pack["examples_per_column"] / pad["examples_per_column"]
    out["throughput_bound_projection"] = pad["waste"] / pack["waste"]
    return out


def notes(results: dict) -> list[str]:
    lines = []
    for dist, r in results.items():
        ph = r["physics"]
        pad, pack = ph["modes"]["pad"], ph["modes"]["pack"]
        sweep = ", ".join(f"B={w['batch']}: {w['examples_per_s_pad']:.0f} vs "
                          f"{w['examples_per_s_pack']:.0f}" for w in r["sweep"])
        lines.append(
            f"{dist}: packing {r['ratio_examples_per_s']:.2f}x LMBR in examples/s "
            f"({PAPER} on GPUs: {r['seed_gpu']['speedup']:.2f}x). Equal budget {r['budget_mb']:.0f} MB "
            f"-> batch {r['pack']['batch']} vs {r['pad']['batch']} "
            f"({r['batch_ratio']:.1f}x; {PAPER}: {r['seed_gpu']['batch_pack']} vs "
            f"{r['seed_gpu']['batch_pad']}). Waste of the timed steps (computed / valid skewed "
            f"cells): pack {pack['waste']:.2f}, LMBR {pad['waste']:.2f}, so a throughput-bound "
            f"device gains ~{ph['throughput_bound_projection']:.2f}x. Fit over "
            f"{ph['fit_steps']} steps (median error {ph['fit_median_relative_error']:.0%}): "
            f"{ph['per_step_s']['pad'] * 1e3:.1f} / {ph['per_step_s']['pack'] * 1e3:.1f} ms "
            f"per LMBR / packed step + {ph['per_column_s'] * 1e3:.3f} ms per skewed column + "
            f"{ph['per_cell_direction_s'] * 1e9:.0f} ns per computed cell-direction "
            f"(model ratio {ph['model_ratio']:.2f}x); a packed step "
            f"({pack['mean_columns']:.0f} columns, {pack['mean_computed_cells']:.0f} cells) "
            f"is {pack['share']['cells']:.0%} cells / {pack['share']['columns']:.0%} columns / "
            f"{pack['share']['step']:.0%} fixed, an LMBR step ({pad['mean_columns']:.0f} "
            f"columns, {pad['mean_computed_cells']:.0f} cells) {pad['share']['cells']:.0%} / "
            f"{pad['share']['columns']:.0%} / {pad['share']['step']:.0%}. A latency-bound "
            f"device (time ~ columns, a GPU below saturation) would gain "
            f"~{ph['latency_bound_projection']:.1f}x (examples per scan column "
            f"{pack['examples_per_column']:.3f} vs {pad['examples_per_column']:.3f})."
            + (f" Equal-batch sweep, examples/s LMBR vs pack: {sweep}; fastest of each "
               f"(memory ignored): pack B={r['best_vs_best']['batch_pack']} vs LMBR "
               f"B={r['best_vs_best']['batch_pad']}, {r['best_vs_best']['ratio']:.2f}x."
               if sweep else "")
            + (" Worst batch at the budget (computed cells per example / the pool's mean "
               "pixels per example): " + "; ".join(
                   f"{name} {r[key]['worst_batch_cells']} cells "
                   f"({r[key]['worst_batch_cells_per_example_over_mean_pixels']:.1f}x)"
                   for key, name in (("pad", "LMBR"), ("pack", "pack"))
                   if "worst_batch_cells" in r[key]) + "."))
    lines.append(
        f"Why the CPU ratio differs from the GPU one of {PAPER}: one CPU core computes every skewed "
        "cell in turn, so once a step has a few hundred scan rows its time is mostly "
        "per-cell cost x computed cells, and examples/s ~ 1 / (waste x pixels per example); "
        "the larger batch that packing's memory saving allows buys only the amortised column "
        "overhead, and the gain is about the ratio of waste factors at the two batch sizes. On "
        "a GPU the cells of a column run in parallel, the time is ~ the number of columns until "
        "the device saturates, and the gain follows examples per column, i.e. the batch ratio "
        "(10x the batch for words in Wenniger et al. 2019). The batch ratio itself is set by the worst batch's "
        "computed cells, see the waste table: packing's own waste (exact-height rows, one skew "
        "triangle per canvas) limits it.")
    return lines


def format_table(results: dict, total_s: float) -> str:
    out = []
    for dist, r in results.items():
        out.append(f"\n== {dist}  (pool {r['pool']['size']}: H median "
                   f"{r['pool']['height']['median']:.0f} [{r['pool']['height']['min']}-"
                   f"{r['pool']['height']['max']}], W median {r['pool']['width']['median']:.0f} "
                   f"[{r['pool']['width']['min']}-{r['pool']['width']['max']}])")
        out.append("waste = computed / valid skewed cells = (1 / fill) x skew factor")
        out.append(f"{'batch':>6} {'LMBR waste':>10} {'fill':>5} {'skew':>5}   "
                   f"{'pack waste':>10} {'fill':>5} {'skew':>5} {'canv.':>6}   {'ratio':>5}")
        for w in r["waste"]:
            out.append(f"{w['batch']:>6} {w['waste_pad']:>10.2f} {w['fill_pad']:>5.0%} "
                       f"{w['skew_factor_pad']:>5.2f}   {w['waste_pack']:>10.2f} "
                       f"{w['fill_pack']:>5.0%} {w['skew_factor_pack']:>5.2f} "
                       f"{w['mean_canvases']:>6.1f}   {w['waste_ratio']:>5.2f}")
        out.append(f"budget {r['budget_mb']:.1f} MB ({r['budget_source']})")
        for key in ("pad", "pack"):
            probes = ", ".join(f"{p['batch']}: {p['peak_mb']:.0f}"
                               + (" (predicted)" if p.get("predicted") else "")
                               for p in r[key]["probes"])
            out.append(f"  {key} probes (batch: peak MB): {probes}")
        out.append(f"{'mode':>6} {'batch':>6} {'peak MB':>8} {'ex/s':>8} {'ex/cpu-s':>9} "
                   f"{'waste':>6} {'columns':>8} {'cells':>8} {'cell%':>6}")
        for key in ("pad", "pack"):
            m, ph = r[key], r["physics"]["modes"][key]
            peak = f"{m['peak_mb']:.1f}" if m["peak_mb"] is not None else "-"
            out.append(f"{key:>6} {m['batch']:>6} {peak:>8} "
                       f"{m['examples_per_s']:>8.1f} {m['examples_per_cpu_s']:>9.1f} "
                       f"{ph['waste']:>6.2f} {ph['mean_columns']:>8.0f} "
                       f"{ph['mean_computed_cells']:>8.0f} {ph['share']['cells']:>6.0%}")
        ph = r["physics"]
        out.append(f"ratio pack/LMBR: {r['ratio_examples_per_s']:.2f}x examples/s "
                   f"({r['ratio_examples_per_cpu_s']:.2f}x per CPU-s), batch "
                   f"{r['batch_ratio']:.1f}x; {PAPER} on GPUs {r['seed_gpu']['speedup']:.2f}x")
        out.append(f"fit: {ph['per_step_s']['pad'] * 1e3:.1f} | "
                   f"{ph['per_step_s']['pack'] * 1e3:.1f} ms/step (LMBR | pack) + "
                   f"{ph['per_column_s'] * 1e3:.3f} ms/column + "
                   f"{ph['per_cell_direction_s'] * 1e9:.0f} ns/cell-dir (median error "
                   f"{ph['fit_median_relative_error']:.0%}); model ratio "
                   f"{ph['model_ratio']:.2f}x; throughput-bound "
                   f"{ph['throughput_bound_projection']:.2f}x, latency-bound "
                   f"{ph['latency_bound_projection']:.2f}x")
        out.append("timed sets (first = equal budget, then equal batch sizes); ns = wall ns "
                   "per computed cell-direction, rows = scan rows R*(Hc+1) or B*(Hmax+1)")
        out.append(f"{'set':>8} | {'B':>4} {'ex/s':>7} {'cpu ex/s':>8} {'ns':>5} {'rows':>6} | "
                   f"{'B':>4} {'ex/s':>7} {'cpu ex/s':>8} {'ns':>5} {'rows':>6} | "
                   f"{'ratio':>5} {'cpu':>5}")
        for t in r["timed_sets"]:
            cells = []
            for key in ("pad", "pack"):
                m = t[key]
                cells.append(f"{m['batch']:>4} {m['examples_per_s']:>7.1f} "
                             f"{m['examples_per_cpu_s']:>8.1f} {m['ns_per_cell_dir']:>5.0f} "
                             f"{m['mean_scan_rows']:>6.0f}")
            out.append(f"{t['label']:>8} | {cells[0]} | {cells[1]} | {t['ratio']:>5.2f} "
                       f"{t['ratio_cpu']:>5.2f}")
        if r["max_wall_over_cpu"] > 1.15:
            out.append(f"WARNING: wall / CPU time up to {r['max_wall_over_cpu']:.2f}: other "
                       "processes shared the cores; the per-CPU-s figures are the robust ones")
    out.append(f"\ntotal {total_s:.0f} s")
    return "\n".join(out)


def measure(args: argparse.Namespace) -> dict:
    t_start = time.perf_counter()
    settings = SETTINGS["quick" if args.quick else "full"]
    bench = Bench(args)
    results = {}
    for dist in args.only or ("words", "lines"):
        results[dist] = bench.distribution(dist, settings[dist])
    total = time.perf_counter() - t_start
    doc = {
        "benchmark": "packing_vs_padding",
        "config": {"quick": args.quick, "threads": args.threads, "seed": args.seed,
                   "via": args.via, "height_step": args.height_step, "scale": SCALE,
                   "units": UNITS, "channels": CHANNELS,
                   "directions": DIRECTIONS, "cell": "leaky_lp",
                   "memory_measure": "peak RSS growth (ru_maxrss) of a fresh subprocess over "
                                     "the two worst batches, after TF import + build + trace",
                   "cpu_count": os.cpu_count(), "loadavg_end": os.getloadavg(),
                   "source_sha1": _source_hashes()},
        "results": results,
        "notes": notes(results),
        "total_s": total,
    }
    print(format_table(results, total))
    if args.out:
        print("\n".join(doc["notes"]))
    return doc


def main(argv=None) -> int:
    parser = _harness.parser(__doc__, threads_help="TensorFlow intra- and inter-op threads of every worker")
    parser.add_argument("--quick", action="store_true", help="small sizes: a ~1 min smoke run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-mb", type=float, default=None,
                        help="activation-memory budget for both distributions (default: 1.05 x "
                             "LMBR's peak at the LMBR batch size of Wenniger et al. 2019)")
    parser.add_argument("--only", choices=sorted(DISTRIBUTIONS), action="append",
                        help="run only this distribution (repeatable)")
    parser.add_argument("--via", choices=("layer", "ops"), default="layer",
                        help="'layer': MDLSTM2D's own ragged path (default); 'ops': pack / pad "
                             "with tfnhr.ops.packing and call the layer's dense masked path "
                             "(a cross-check of the layer's ragged overhead)")
    parser.add_argument("--height-step", type=int, default=1,
                        help="plan_packing's height_step for packing (default 1: exact-height "
                             "row buckets, as in Wenniger et al. 2019)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        with open(args.worker) as f:
            print(json.dumps(worker(json.load(f))))
        return 0
    return _harness.main(measure, args)


if __name__ == "__main__":
    sys.exit(main())
