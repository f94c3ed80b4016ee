"""Runtime and peak memory of ``MDLSTM2D(cell="lstm", directions=1)`` on height-1 input against
``keras.layers.LSTM`` on the same 1-D sequences (Doetsch et al. 2017 (RETURNN), §6, Table 1: LSTM
implementations).

Usage::

    python benchmarks/lstm_speed.py [--threads 1] [--quick] [--rounds 5] [--tuned-env]
                                    [--memory auto|all|none] [--only dense|ragged] [--out res.json]

Pin the process to one core for stable single-thread figures (``taskset -c 1 python ...``).
Without ``--out`` the JSON goes to stdout after the table (the table then goes to stderr).
~10 minutes on 2 shared vCPUs (``--quick``: ~2).

What is compared
----------------

* **keras**: ``keras.layers.LSTM(units, return_sequences=True)`` on ``[B, T, C]`` inside a
  plain ``tf.function``: what ``model.fit`` runs on a CPU-only host (Keras resolves
  ``jit_compile="auto"`` to no XLA there, and cuDNN is GPU-only), i.e. Keras' generic
  ``tf.while_loop`` RNN with TensorFlow's generic while-loop gradient; **k+XLA**: the same step
  in ``tf.function(jit_compile=True)``.
* **ours**: ``tfnhr.layers.MDLSTM2D(units, cell="lstm", directions=1)`` on ``[B, 1, T, C]``
  with the layer's defaults (dense input: XLA; ragged input: example packing, no XLA); dense
  also **ours-XLA** (``jit_compile=False``), ragged also **ours+XLA** (``jit_compile=True``:
  one XLA compilation per packed shape, i.e. per new batch in training; shown for what XLA
  would give, not as a usable setting for ragged training).

Two modes: **fwd** (forward pass and the sum-of-squares loss of the outputs) and **train**
(forward, loss, gradients w.r.t. the input and all weights; no optimizer). Every step function
is called once untimed (trace / XLA compilation: ``first_call_s``) and once more untimed; then
all steps of a configuration run interleaved, ``--rounds`` times each (3 where a step takes
over ``SLOW_STEP_S``), so load changes on shared cores hit every variant alike. Reported: the
median **process CPU time** per step (robust to other processes on the core; equal to the
wall time on an idle core with one thread), the median and minimum wall time in the JSON.

Inputs (``C = 32``, one batch per configuration, seeded): **dense** ``[B, T, C]``
(``DENSE``); **ragged** (``RAGGED``): ``B`` sequences of lengths drawn from ``U(T/4, T)``.
Ours gets the ragged ``[B, (1), (W), C]`` batch and packs it (rows of height 1 and width
``max W``, filled greedily, one separator step between sequences); keras gets the zero-padded
``[B, max W, C]`` batch with its mask, and its loss sums the squares at valid steps only.

Same function. With the peephole weights zero, the 2-D LSTM cell of a height-1 image is Keras'
LSTM cell: Keras' gates ``[i, f, c, o]`` become ``[i, f1, a, o]``; the second forget gate
``f2`` and the ``h2`` rows act on the upper predecessor, which is the zero border for every
cell (their weights do not matter; the script sets them to zero); ``s = i a + f1 s1``,
``y = o tanh(s)`` (:mod:`tfnhr.layers.mdlstm_cells`). The script copies each Keras LSTM's
weights into the MDLSTM2D layers (:func:`copy_keras_lstm_weights`) and reports, per
configuration and mode, the largest difference of the outputs and of all gradients (ours
mapped back onto Keras' weights) relative to the largest Keras value: float32 rounding
(~1e-7-1e-6). ``tests/tfnhr/layers/test_mdlstm_lstm_equivalence.py`` asserts it on a small case.

Peak memory (``--memory``; the training step of keras and ours, each in a fresh subprocess
with ``TF_CPU_ALLOCATOR_USE_BFC=true``):

* **RSS**: growth of the process's RSS high-water mark (``VmHWM``) over two training steps
  (the first traces and compiles) from a baseline taken after the imports, building the layer
  and making the input. Not ``ru_maxrss``: Linux carries the launching process's peak over
  ``exec`` into a child's ``ru_maxrss``, so in a child of this benchmark it starts at the
  parent's size (>400 MiB) and hides the growth. Includes XLA's compiler and code, the traced
  graphs and what the allocator keeps.
* **alloc**: ``tf.config.experimental.get_memory_info("CPU:0")["peak"]`` over the second step
  after ``reset_memory_stats``: TensorFlow's (and XLA's) tensor allocations only. This needs
  the BFC allocator (without it TF 2.18 raises "Allocator stats not available for device
  'CPU:0'"). An RSS-only per-step figure (glibc's mmap threshold pinned to 64 KiB so that
  freed tensors leave the RSS) is not reported: Keras' many 32 KiB per-step tensors come
  from glibc's heap, whose pages stay resident, so it undercounts Keras (39 vs 146 MiB).

``--tuned-env`` runs the timings with ``TF_CPU_ALLOCATOR_USE_BFC=true`` and
``XLA_FLAGS=--xla_cpu_use_thunk_runtime=false`` (``_harness.TUNED_ENV``; see
benchmarks/mdlstm_speed.py).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import sys
import time

import _harness
import numpy as np

CHANNELS = 32
DENSE = [(b, t, CHANNELS, u) for u in (32, 128) for b, t in ((16, 100), (64, 100), (64, 400))]
RAGGED = [(64, 100, CHANNELS, 32), (64, 400, CHANNELS, 32), (64, 400, CHANNELS, 128)]
"""(B, T, C, units); B = 16 at T = 400 and ragged u = 128 at T = 100 are left out to fit the run
into ~10 minutes on 2 shared vCPUs (XLA compilations and the memory subprocesses, not the timed
steps, take most of it); a first run with them showed the same ratios."""
QUICK_DENSE = [(16, 100, CHANNELS, 32), (16, 100, CHANNELS, 128)]
QUICK_RAGGED = [(16, 100, CHANNELS, 32)]
MODES = ("fwd", "train")
VARIANTS = {"dense": ("keras", "keras_xla", "ours", "ours_noxla"),
            "ragged": ("keras", "keras_xla", "ours", "ours_xla")}
LABELS = {"keras": "keras", "keras_xla": "k+XLA", "ours": "ours", "ours_noxla": "ours-XLA",
          "ours_xla": "ours+XLA"}
MEMORY_VARIANTS = ("keras", "ours")
SLOW_STEP_S = 1.5
"""A step slower than this (first timed call) gets 3 rounds instead of ``--rounds``."""


def _setup_tf(threads: int):
    import logging

    # Every configuration makes new tf.functions from the same code, which TensorFlow's
    # "N out of the last M calls ... triggered retracing" heuristic counts as retracing;
    # bench_config checks each step function's own trace count instead.
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    return _harness.set_threads(threads)


# --------------------------------------------------------------------------- layers and inputs


def copy_keras_lstm_weights(lstm, layer) -> None:
    """Make a built ``MDLSTM2D(cell="lstm", directions=1)`` compute ``lstm``'s function on
    height-1 input: Keras' gates ``[i, f, c, o]`` become ``[i, f1, a, o]``, the second forget
    gate ``f2``, the ``h2`` rows and all peephole weights are zero."""
    kernel, recurrent, bias = (np.asarray(w) for w in lstm.get_weights())
    u = recurrent.shape[0]
    i, f, c, o = (slice(k * u, (k + 1) * u) for k in range(4))

    def gates(w):  # [..., 4u] -> [..., 5u] in MDLSTM's order [i, f1, f2, a, o]
        return np.concatenate([w[..., i], w[..., f], np.zeros_like(w[..., i]), w[..., c],
                               w[..., o]], axis=-1)

    layer.kernel.assign(gates(kernel)[None])
    layer.recurrent_kernel.assign(
        np.concatenate([gates(recurrent), np.zeros((u, 5 * u), recurrent.dtype)])[None])
    layer.bias.assign(gates(bias)[None])
    layer.peephole_kernel.assign(np.zeros(layer.peephole_kernel.shape, np.float32))
    layer.output_peephole_kernel.assign(np.zeros(layer.output_peephole_kernel.shape, np.float32))


def mdlstm_grads_as_keras(grads) -> list[np.ndarray]:
    """Gradients w.r.t. ``MDLSTM2D``'s ``[kernel, recurrent_kernel, peephole_kernel,
    output_peephole_kernel, bias]`` -> those of the Keras LSTM weights they were copied from."""
    kernel, recurrent, _, _, bias = (np.asarray(g)[0] for g in grads)
    u = recurrent.shape[0] // 2

    def gates(w):  # [..., 5u] -> [..., 4u]: drop f2
        return np.concatenate([w[..., :2 * u], w[..., 3 * u:]], axis=-1)

    return [gates(kernel), gates(recurrent[:u]), gates(bias)]


def make_layers(tf, channels: int, units: int, variants, seed: int) -> dict:
    """The layers of ``variants`` (keras variants share one LSTM; ours copy its weights)."""
    import keras

    from tfnhr.layers.mdlstm import MDLSTM2D

    keras.utils.set_random_seed(seed)
    lstm = keras.layers.LSTM(units, return_sequences=True)
    lstm.build((None, None, channels))
    layers = {}
    for variant in variants:
        if variant.startswith("keras"):
            layers[variant] = lstm
        else:
            jit = {"ours_noxla": False, "ours_xla": True}.get(variant, "auto")
            layer = MDLSTM2D(units, cell="lstm", directions=1, jit_compile=jit)
            layer.build((None, 1, None, channels))
            copy_keras_lstm_weights(lstm, layer)
            layers[variant] = layer
    return layers


def make_inputs(tf, kind: str, batch: int, length: int, channels: int, seed: int) -> dict:
    """``{"keras": (x, lengths or None), "ours": x4}`` for one configuration."""
    rng = np.random.default_rng(seed)
    if kind == "dense":
        x = tf.constant(rng.standard_normal((batch, length, channels), np.float32))
        return {"keras": (x, None), "ours": x[:, tf.newaxis], "lengths": [length] * batch}
    lengths = rng.integers(length // 4, length + 1, batch)
    flat = tf.constant(rng.standard_normal((int(lengths.sum()), channels), np.float32))
    padded = tf.RaggedTensor.from_row_lengths(flat, lengths).to_tensor()
    ours = tf.RaggedTensor.from_nested_row_lengths(
        flat, [np.ones(batch, np.int64), lengths.astype(np.int64)])
    return {"keras": (padded, tf.constant(lengths, tf.int32)), "ours": ours,
            "lengths": lengths.tolist()}


def make_step(tf, variant: str, mode: str, layer, inputs):
    """A ``tf.function`` step and its argument tuple. Returns ``(loss, y, grads)``: ``y`` the
    outputs ``[B, T', u]`` (zero at padding; ours on ragged input: ragged), ``grads`` ``[dx, *d(weights)]`` (train) or
    ``[]`` (fwd)."""
    if variant.startswith("keras"):
        x, lengths = inputs["keras"]

        def forward(x, lengths):  # -> (values the loss sums the squares of, padded y)
            if lengths is None:
                y = layer(x)
                return y, y
            mask = tf.sequence_mask(lengths, tf.shape(x)[1])
            y = layer(x, mask=mask) * tf.cast(mask, x.dtype)[..., tf.newaxis]
            return y, y

        args = (x, lengths)
    else:
        ragged = isinstance(inputs["ours"], tf.RaggedTensor)

        def forward(x):
            y = layer(x)
            if ragged:  # [B, (1), (W), u], padded only for the comparison, outside the step
                # (TF 2.18: the gradient of .to_tensor() of the layer's ragged output reaches
                # the unpack gather as IndexedSlices, which tfnhr.ops.packing rejects)
                return y.flat_values, y
            return y[:, 0], y[:, 0]

        args = (inputs["ours"],)

    def step(*args):
        if mode == "fwd":
            values, y = forward(*args)
            return tf.reduce_sum(values * values), y, []
        x = args[0]
        source = x.flat_values if isinstance(x, tf.RaggedTensor) else x
        with tf.GradientTape() as tape:
            tape.watch(source)
            values, y = forward(*args)
            loss = tf.reduce_sum(values * values)
        return loss, y, tape.gradient(loss, [source] + layer.trainable_weights)

    return tf.function(step, jit_compile=variant == "keras_xla"), args


def _run(fn, args):
    out = fn(*args)
    out[0].numpy()
    for g in out[2]:
        g.numpy()
    return out


# --------------------------------------------------------------------------- equivalence


def _max_diffs(tf, kind, inputs, outs: dict) -> dict:
    """Largest |ours - keras| over valid steps: outputs and (train) every gradient, for each
    ours variant against the keras one; also the largest |keras value| for scale."""
    lengths = np.asarray(inputs["lengths"])
    valid = np.arange(max(lengths))[None, :] < lengths[:, None]  # [B, T']
    ref = outs["keras"]
    y_ref = np.asarray(ref[1])
    result = {}
    for variant, (_, y, grads) in outs.items():
        if not variant.startswith("ours"):
            continue
        if isinstance(y, tf.RaggedTensor):
            y = y.merge_dims(1, 2).to_tensor()
        y = np.asarray(y)
        diff = {"y": float(np.max(np.abs(y - y_ref)[valid])),
                "y_scale": float(np.max(np.abs(y_ref)))}
        if grads:
            dx_ref = np.asarray(ref[2][0])
            dx = np.asarray(grads[0])
            if kind == "dense":
                dx = dx[:, 0]
            else:
                dx_ref = dx_ref[valid]
            diff["dx"] = float(np.max(np.abs(dx - dx_ref)))
            diff["dx_scale"] = float(np.max(np.abs(dx_ref)))
            mapped = mdlstm_grads_as_keras(grads[1:])
            diff["dweights"] = float(max(np.max(np.abs(a - np.asarray(b)))
                                         for a, b in zip(mapped, ref[2][1:])))
            diff["dweights_scale"] = float(max(np.max(np.abs(np.asarray(b)))
                                               for b in ref[2][1:]))
        result[variant] = diff
    return result


# --------------------------------------------------------------------------- timing


def bench_config(tf, kind: str, config, rounds: int, seed: int) -> dict:
    batch, length, channels, units = config
    variants = VARIANTS[kind]
    layers = make_layers(tf, channels, units, variants, seed)
    inputs = make_inputs(tf, kind, batch, length, channels, seed + 1)
    steps, first_call, outs = {}, {}, {}
    for mode in MODES:
        for variant in variants:
            fn, args = make_step(tf, variant, mode, layers[variant], inputs)
            first_call[(mode, variant)] = _harness.timed(_run, fn, args)[1]
            out, wall, _ = _harness.timed(_run, fn, args)  # untimed; decides the round count
            steps[(mode, variant)] = (fn, args, wall)
            if variant != "keras_xla":
                outs.setdefault(mode, {})[variant] = out
    slow = max(w for _, _, w in steps.values()) > SLOW_STEP_S
    n = min(rounds, 3) if slow else rounds
    times = _harness.interleaved(
        {key: functools.partial(_run, fn, args) for key, (fn, args, _) in steps.items()}, n)
    walls = {key: measured.wall for key, measured in times.items()}
    cpus = {key: measured.cpu for key, measured in times.items()}
    traces = {f"{mode}/{variant}": fn.experimental_get_tracing_count()
              for (mode, variant), (fn, _, _) in steps.items()}
    if max(traces.values()) > 1:  # every step function should have been traced exactly once
        _harness.log(f"WARNING: retraced step functions: {traces}")
    result = {"kind": kind, "batch": batch, "length": length, "channels": channels,
              "units": units, "rounds": n, "max_traces_per_step": max(traces.values()),
              "valid_steps": int(sum(inputs["lengths"])),
              "padded_steps": int(batch * max(inputs["lengths"])), "modes": {}}
    if kind == "ragged":
        result["packed"] = _packed_shape(tf, inputs["ours"])
    for mode in MODES:
        m = {}
        for variant in variants:
            key = (mode, variant)
            m[variant] = {
                "ms_median": round(statistics.median(walls[key]) * 1e3, 2),
                "ms_min": round(min(walls[key]) * 1e3, 2),
                "cpu_ms_median": round(statistics.median(cpus[key]) * 1e3, 2),
                "first_call_s": round(first_call[key], 2),
            }
        ours = m["ours"]["cpu_ms_median"]
        m["ratio_keras_over_ours"] = round(m["keras"]["cpu_ms_median"] / ours, 2)
        m["ratio_keras_xla_over_ours"] = round(m["keras_xla"]["cpu_ms_median"] / ours, 2)
        m["ratio_keras_over_ours_wall"] = round(
            m["keras"]["ms_median"] / m["ours"]["ms_median"], 2)
        m["max_wall_over_cpu"] = round(max(m[v]["ms_median"] / m[v]["cpu_ms_median"]
                                           for v in variants), 2)
        result["modes"][mode] = m
    result["matmul_macs_per_cell"] = macs_per_cell(channels, units)
    result["max_abs_diff"] = {mode: _max_diffs(tf, kind, inputs, outs[mode]) for mode in MODES}
    return result


def macs_per_cell(channels: int, units: int) -> dict:
    """Forward matmul multiply-adds per sequence step and example (bias and elementwise work
    not counted): Keras ``4u (C + u)``; ours (``units >= SPLIT_MIN_UNITS``: two matmuls) the
    peephole gates ``i, f1, f2`` over ``[x; 1; h1; h2; s1; s2]``, the others ``a, o`` over
    ``[x; 1; h1; h2]``, and the output peephole ``u x u`` (below ``SPLIT_MIN_UNITS``: one
    ``5u x (C + 1 + 4u)`` matmul)."""
    from tfnhr.layers.mdlstm_scan import SPLIT_MIN_UNITS

    c, u = channels, units
    keras_macs = 4 * u * (c + u)
    if u >= SPLIT_MIN_UNITS:
        ours = 3 * u * (c + 1 + 4 * u) + 2 * u * (c + 1 + 2 * u) + u * u
    else:
        ours = 5 * u * (c + 1 + 4 * u) + u * u
    return {"keras": keras_macs, "ours": ours, "ours_over_keras": round(ours / keras_macs, 2)}


def _packed_shape(tf, ragged) -> dict:
    """Canvases ``R x 1 x Wc`` that example packing makes of this batch."""
    from tfnhr.ops.packing import image_sizes, plan_packing

    layout = plan_packing(image_sizes(ragged))
    return {"rows": layout.num_canvases, "width": layout.canvas_width,
            "computed_cells": layout.computed_cells(), "valid_cells": layout.valid_cells()}


# --------------------------------------------------------------------------- memory


def _maxrss_kb() -> int:
    """The high-water RSS of this process's address space (``VmHWM``). Not ``ru_maxrss``: Linux
    carries the launching process's peak RSS over ``exec`` into the child's ``ru_maxrss``, so
    in a child of this (large) benchmark process it starts at the parent's size."""
    return _harness.status_kb("VmHWM")


def memory_child(task: dict) -> dict:
    """In a fresh process under the BFC allocator: peak memory of a training step of one layer
    (module docstring)."""
    tf = _setup_tf(task["threads"])
    batch, length, channels, units = task["config"]
    variant = task["variant"]
    layer = make_layers(tf, channels, units, (variant,), task["seed"])[variant]
    inputs = make_inputs(tf, task["kind"], batch, length, channels, task["seed"] + 1)
    fn, args = make_step(tf, variant, "train", layer, inputs)
    base = _maxrss_kb()
    _run(fn, args)  # trace, compile, first run
    first = _maxrss_kb()
    tf.config.experimental.reset_memory_stats("CPU:0")
    _run(fn, args)
    return {"kind": task["kind"], "config": task["config"], "variant": variant,
            "baseline_rss_mib": round(base / 1024, 1),
            "rss_growth_first_step_mib": round((first - base) / 1024, 1),
            "rss_growth_two_steps_mib": round((_maxrss_kb() - base) / 1024, 1),
            "allocator_peak_mib": round(
                tf.config.experimental.get_memory_info("CPU:0")["peak"] / 2**20, 1)}


def measure_memory(kind: str, config, threads: int, seed: int) -> dict:
    results = {}
    for variant in MEMORY_VARIANTS:
        env = {k: v for k, v in os.environ.items() if k not in _harness.TUNED_ENV}
        env.update(TF_CPP_MIN_LOG_LEVEL="2", TF_CPU_ALLOCATOR_USE_BFC="true")
        task = {"kind": kind, "config": list(config), "variant": variant,
                "threads": threads, "seed": seed}
        t0 = time.perf_counter()
        results[variant] = _harness.run_child(__file__, ["--memory-child", json.dumps(task)], env)
        results[variant]["child_s"] = round(time.perf_counter() - t0, 1)
    return results


# --------------------------------------------------------------------------- report


def _fmt_diff(d: dict) -> str:
    ours = d.get("ours", {})
    keys = [k for k in ("y", "dx", "dweights") if k in ours]
    return " ".join(f"{ours[k] / max(ours[k + '_scale'], 1e-30):.0e}" for k in keys)


def _span(values) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}x"


def summary(result: dict) -> dict:
    """Training-step ratios (median CPU time, keras / ours) grouped by input kind and units,
    and the memory ratios (keras / ours)."""
    groups = {}
    for c in result["configs"]:
        g = groups.setdefault(f"u={c['units']} {c['kind']}", {"keras": [], "keras_xla": [],
                                                            "alloc": [], "rss": []})
        train = c["modes"]["train"]
        g["keras"].append(train["ratio_keras_over_ours"])
        g["keras_xla"].append(train["ratio_keras_xla_over_ours"])
        if "memory" in c:
            k, o = c["memory"]["keras"], c["memory"]["ours"]
            g["alloc"].append(k["allocator_peak_mib"] / o["allocator_peak_mib"])
            g["rss"].append(k["rss_growth_two_steps_mib"] / o["rss_growth_two_steps_mib"])
    return groups


def recommendation(result: dict) -> str:
    """One line, from the training-step figures of this run (see :func:`summary`)."""
    groups = summary(result)
    ours = [g for g, v in groups.items() if min(v["keras"]) > 1.0]
    keras_ = [g for g, v in groups.items() if max(v["keras"]) < 1.0]
    mixed = [g for g in groups if g not in ours and g not in keras_]

    def describe(names):
        return "; ".join(f"{g}: ours at {_span(groups[g]['keras'])} keras' speed"
                         f" ({_span(groups[g]['keras_xla'])} of keras+XLA's)" for g in names)

    parts = []
    if keras_:
        parts.append(f"use keras.layers.LSTM for 1-D sequences with {', '.join(keras_)} "
                     f"[{describe(keras_)}]")
    if ours:
        parts.append(f"MDLSTM2D height-1 with {', '.join(ours)} [{describe(ours)}]")
    if mixed:
        parts.append(f"either with {', '.join(mixed)} [{describe(mixed)}]")
    return "Recommendation (training step, this machine, keras / ours > 1: ours faster): " + \
        "; ".join(parts) + "."


def print_table(result: dict) -> None:
    machine = result["machine"]
    print(f"\nthreads {machine['threads']}, environment {machine['environment']}. Median "
          f"process CPU ms per step (= wall ms on an idle core with one thread; wall in the "
          f"JSON); k/o = keras / ours, kX/o = keras+XLA / ours (> 1: ours faster); 1st call = "
          f"trace + compile + first run, s; rel. diff = max|ours - keras| / max|keras| of y, "
          f"dx, dW")
    for kind in ("dense", "ragged"):
        configs = [c for c in result["configs"] if c["kind"] == kind]
        if not configs:
            continue
        variants = VARIANTS[kind]
        print(f"\n== {kind}" + (" [B, T, 32] (ours [B, 1, T, 32])" if kind == "dense" else
                                " [B, (T_i), 32], T_i ~ U(T/4, T): keras padded + mask, ours "
                                "packed (ours+XLA: jit_compile=True, one compilation per packed "
                                "shape)"))
        print(f"{'B':>3} {'T':>4} {'u':>4} {'mode':>5} | "
              + " ".join(f"{LABELS[v]:>8}" for v in variants)
              + f" | {'k/o':>5} {'kX/o':>5} | {'1st call k/kX/o':>15} | rel. diff y dx dW")
        for c in configs:
            for mode in MODES:
                m = c["modes"][mode]
                times = " ".join(f"{m[v]['cpu_ms_median']:>8.1f}" for v in variants)
                first = "/".join(f"{m[v]['first_call_s']:.1f}"
                                 for v in ("keras", "keras_xla", "ours"))
                print(f"{c['batch']:>3} {c['length']:>4} {c['units']:>4} {mode:>5} | {times} | "
                      f"{m['ratio_keras_over_ours']:>5.2f} {m['ratio_keras_xla_over_ours']:>5.2f}"
                      f" | {first:>15} | {_fmt_diff(c['max_abs_diff'][mode])}")
            if kind == "ragged":
                p = c["packed"]
                print(f"{'':>13} ours packs {c['batch']} sequences into {p['rows']} rows x "
                      f"{p['width']} (computed / valid steps {p['computed_cells'] / p['valid_cells']:.2f});"
                      f" keras pads to {c['padded_steps'] / c['valid_steps']:.2f}")
    macs = {c["units"]: c["matmul_macs_per_cell"] for c in result["configs"]}
    print("\nforward matmul multiply-adds per step and example, ours / keras: " + ", ".join(
        f"u={u}: {m['ours']} / {m['keras']} = {m['ours_over_keras']}x"
        for u, m in sorted(macs.items())) + " (ours also computes f2, the zero upper "
          "neighbour's h2 / s2 terms and the peepholes)")
    worst = max(c["modes"][m]["max_wall_over_cpu"] for c in result["configs"] for m in MODES)
    if worst > 1.15:
        print(f"WARNING: wall / CPU time up to {worst:.2f}: other processes shared the core")
    if any("memory" in c for c in result["configs"]):
        print("\n== peak memory of one training step, MiB (fresh subprocess per layer, BFC "
              "allocator): RSS = growth of the RSS high-water mark over two steps (the first "
              "with trace / XLA compile) from a baseline after imports, build and input; alloc "
              "= TensorFlow allocator peak of the second step (tensors only); k/o = keras / ours")
        print(f"{'kind':>6} {'B':>3} {'T':>4} {'u':>4} | {'RSS keras':>9} {'ours':>7} {'k/o':>5} | "
              f"{'alloc keras':>11} {'ours':>7} {'k/o':>5}")
        for c in result["configs"]:
            mem = c.get("memory")
            if not mem:
                continue
            k, o = mem["keras"], mem["ours"]
            rss, alloc = "rss_growth_two_steps_mib", "allocator_peak_mib"
            print(f"{c['kind']:>6} {c['batch']:>3} {c['length']:>4} {c['units']:>4} | "
                  f"{k[rss]:>9.1f} {o[rss]:>7.1f} {k[rss] / max(o[rss], 0.1):>5.2f} | "
                  f"{k[alloc]:>11.1f} {o[alloc]:>7.1f} {k[alloc] / max(o[alloc], 0.1):>5.2f}")
    print("\nSame function: ours = keras up to float32 rounding in every configuration "
          "(keras weights copied into ours; f2, the h2 rows and the peepholes zero; every cell's "
          "upper neighbour in a height-1 image is the zero border). Max rel. diff this run: "
          f"{result['max_rel_diff']:.0e}")
    for name, g in summary(result).items():
        mem = (f"; tensor memory keras / ours {_span(g['alloc'])}, RSS {_span(g['rss'])}"
               if g["alloc"] else "")
        print(f"{name:>12}: train keras / ours {_span(g['keras'])}, keras+XLA / ours "
              f"{_span(g['keras_xla'])}{mem}")
    print(result["recommendation"])


def measure(args: argparse.Namespace) -> dict:
    environment = _harness.tuned_env(args.tuned_env)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    tf = _setup_tf(args.threads)
    t_start = time.perf_counter()
    plan = []
    if args.only != "ragged":
        plan += [("dense", c) for c in (QUICK_DENSE if args.quick else DENSE)]
    if args.only != "dense":
        plan += [("ragged", c) for c in (QUICK_RAGGED if args.quick else RAGGED)]
    result = {
        "benchmark": "lstm_speed",
        "machine": {"processor": platform.processor() or platform.machine(),
                    "cpu_model": _harness.cpu_model(), "cpu_count": os.cpu_count(),
                    "threads": args.threads, "environment": environment, "tensorflow": tf.__version__},
        "memory": args.memory,
        "configs": [],
    }
    for kind, config in plan:
        _harness.log(f"[{kind} B{config[0]} T{config[1]} C{config[2]} u{config[3]}] timing ...")
        entry = bench_config(tf, kind, config, args.rounds, args.seed)
        if args.memory == "all" or (args.memory == "auto" and (
                args.quick or kind == "ragged" or config[0] == max(c[0] for c in DENSE))):
            _harness.log(f"[{kind} B{config[0]} T{config[1]} u{config[3]}] memory ...")
            entry["memory"] = measure_memory(kind, config, args.threads, args.seed)
        result["configs"].append(entry)
    result["max_rel_diff"] = max(
        d[k] / max(d[k + "_scale"], 1e-30) for c in result["configs"]
        for per_mode in c["max_abs_diff"].values() for d in per_mode.values()
        for k in ("y", "dx", "dweights") if k in d)
    result["recommendation"] = recommendation(result)
    result["total_s"] = round(time.perf_counter() - t_start, 1)
    result["machine"]["loadavg_end"] = os.getloadavg()
    print_table(result)
    print(f"total {result['total_s']:.0f} s")
    return result


def main(argv=None) -> int:
    parser = _harness.parser(__doc__, rounds=5, tuned_env=True)
    parser.add_argument("--quick", action="store_true", help="three small configs: a smoke run")
    parser.add_argument("--seed", type=int, default=0, help="weights and inputs (default 0)")
    parser.add_argument("--memory", choices=("auto", "all", "none"), default="auto",
                        help="peak memory (two subprocesses per configuration) for every "
                             "configuration, none, or (auto) the ragged ones and the dense ones "
                             "with the largest batch (all with --quick)")
    parser.add_argument("--only", choices=("dense", "ragged"), help="one input kind only")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        print(json.dumps(memory_child(json.loads(args.memory_child))))
        return 0
    return _harness.main(measure, args)


if __name__ == "__main__":
    sys.exit(main())
