"""Speed (and peak memory) of the 4-directional Leaky-LP ``MDLSTM2D`` layer, forward + backward.

Usage::

    python benchmarks/mdlstm_speed.py [--threads 1] [--configs L1,L2,L3,L4] [--rounds 5]
                                      [--tuned-env] [--no-naive] [--no-memory] [--out res.json]

Pin the process to cores for stable single-thread figures (``taskset -c 0 python ...``).
Without ``--out`` the JSON goes to stdout after the table (the table then goes to stderr).

What it measures
----------------

* **Cell updates per second** of one training step (forward, then gradients w.r.t. the input
  and all weights) on a dense batch: ``B * 4 directions * H * W / step time``, for the configs
  L1-L4 (``CONFIGS``) and six layer variants, ``input_projection`` in
  ``{"in_loop", "precompute"}`` x the scan: the ``tf.while_loop`` of TensorFlow ops
  (``scan_kernel="ops"``) without and with XLA (``+xla``), and the compiled C++ scan
  (``+compiled``, :mod:`tfnhr.ops.scan_kernel`).  The variants of
  a config run interleaved, ``--rounds`` times each, and report the fastest and the median
  round (the machines are shared and noisy: compare within a run).  ``"auto"`` is the variant
  the layer's defaults pick.
* **Naive baseline** (``--no-naive`` skips it): the same cells computed one at a time by a
  ``tf.while_loop`` over the pixels of each direction in scan order (batched over ``B`` only,
  TensorArray states, TensorFlow's generic while-loop gradient).  It is ~100x slower, so it runs
  on a crop of the config (``NAIVE_CROP``, stated in the output) and is reported as cell updates
  per second, which do not depend on the crop size for a per-cell loop.
* **Achieved GFLOP/s** and its fraction of the machine's single-thread matmul peak, measured in
  the same run as a 1024 x 1024 float32 ``tf.matmul`` (best of 10).  Counted FLOPs are the
  matmul FLOPs the cell needs per valid cell and direction, ``2 * [(C + 1 + 2u) * 5u`` (input,
  bias, recurrent) ``+ 2u * 2u`` (peepholes on ``s1, s2`` into ``i, l``) ``+ u * 2u]``
  (output gates' memory term), times 3 for forward + backward (input and weight gradients);
  elementwise work and the skew triangles' cells are not counted.
* **Peak memory of one L4 training step** (``--no-memory`` skips it), measured in a fresh
  subprocess that uses TensorFlow's BFC allocator on CPU (``TF_CPU_ALLOCATOR_USE_BFC=true``),
  which makes ``tf.config.experimental.get_memory_info("CPU:0")`` work: after a warm-up step the
  peak counter is reset, one step runs, and the peak of TensorFlow's tensor allocations is
  reported (plus the process's RSS high-water mark for reference), for the compiled scan (the
  layer's default), the TensorFlow-ops scan with XLA (what dense input runs where the compiled
  scan is not used) and without.

``--tuned-env`` runs the speed measurements with two process settings (``_harness.TUNED_ENV``)
that must be in place before TensorFlow starts, so they are environment variables, not layer
options: ``TF_CPU_ALLOCATOR_USE_BFC=true`` (TensorFlow's default CPU allocator returns large
blocks to the OS, so every step page-faults its big tensors in again; the BFC allocator keeps
them) and ``XLA_FLAGS=--xla_cpu_use_thunk_runtime=false`` (XLA:CPU's older runtime, which
compiles the whole loop body into one function instead of dispatching a "thunk" per kernel).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys

import _harness

CONFIGS = {  # name: (batch, height, width, input channels, units)
    "L1": (8, 32, 256, 4, 2),
    "L2": (8, 16, 128, 6, 10),
    "L3": (8, 8, 64, 20, 50),
    "L4": (8, 32, 256, 4, 20),
}
TARGETS = {  # cell updates/s on one thread: Wenniger et al. 2019's PyTorch code, one-hour TF prototype
    "L1": {"seed_pytorch": 0.23e6, "prototype": 4.4e6},
    "L2": {"seed_pytorch": 0.095e6, "prototype": 0.95e6},
    "L3": {"seed_pytorch": 0.03e6, "prototype": 0.13e6},
    "L4": {"seed_pytorch": 0.09e6, "prototype": 0.6e6},
}
VARIANTS = [(p, k) for p in ("in_loop", "precompute") for k in ("ops", "ops+xla", "compiled")]
"""``(input_projection, scan)``: ``ops`` / ``ops+xla`` the TensorFlow-ops scan without / with XLA,
``compiled`` the C++ scan."""
MEMORY_VARIANTS = ("compiled", "ops+xla", "ops")
NAIVE_CROP = (8, 16)  # (height, width) of the naive baseline's crop
MEMORY_CONFIG = "L4"


def _training_step(tf, layer, x):
    """A compiled forward + backward step returning the input and weight gradients."""

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
            loss = tf.reduce_sum(y * y)
        return tape.gradient(loss, [x] + layer.trainable_weights)

    return lambda: [g.numpy() for g in step(x)]


def _scan_kwargs(scan: str) -> dict:
    """``MDLSTM2D`` arguments of a scan variant (``compiled``, ``ops``, ``ops+xla``)."""
    if scan == "compiled":
        return {"scan_kernel": "compiled", "jit_compile": False}
    return {"scan_kernel": "ops", "jit_compile": scan == "ops+xla"}


def _make_layer(tf, channels: int, units: int, **kwargs):
    import keras

    from tfnhr.layers.mdlstm import MDLSTM2D

    keras.utils.set_random_seed(0)
    layer = MDLSTM2D(units, cell="leaky_lp", directions=4, **kwargs)
    layer.build((None, None, None, channels))
    return layer


def naive_step(tf, layer, x):
    """Per-cell ``tf.while_loop`` baseline with the layer's weights (generic gradient).

    Every direction flips the input, then loops over the ``H * W`` pixels in scan order,
    computing one Leaky-LP cell for the whole batch per iteration from the TensorArray states
    of its left and upper neighbours.
    """
    batch, height, width, _ = x.shape
    units = layer.units
    cells = height * width
    flips = ((), (2,), (1,), (1, 2))

    def one_direction(d, image, weights):
        kernel, recurrent, peephole, output_peephole, bias = weights
        seq = tf.reshape(tf.reverse(image, flips[d]) if flips[d] else image, [batch, cells, -1])
        seq = tf.transpose(seq, [1, 0, 2])
        zeros = tf.zeros([batch, units])

        def body(k, h_ta, s_ta):
            row, col = k // width, k % width
            h1 = tf.cond(col > 0, lambda: h_ta.read(tf.maximum(k - 1, 0)), lambda: zeros)
            s1 = tf.cond(col > 0, lambda: s_ta.read(tf.maximum(k - 1, 0)), lambda: zeros)
            h2 = tf.cond(row > 0, lambda: h_ta.read(tf.maximum(k - width, 0)), lambda: zeros)
            s2 = tf.cond(row > 0, lambda: s_ta.read(tf.maximum(k - width, 0)), lambda: zeros)
            z = (tf.matmul(seq[k], kernel) + tf.matmul(tf.concat([h1, h2], -1), recurrent)
                 + tf.pad(tf.matmul(tf.concat([s1, s2], -1), peephole), [[0, 0], [0, 3 * units]])
                 + bias)
            i, lam, a, zo = tf.split(z, [units, units, units, 2 * units], -1)
            i, lam, a = tf.sigmoid(i), tf.sigmoid(lam), tf.tanh(a)
            sbar = lam * s1 + (1 - lam) * s2
            s = i * a + (1 - i) * sbar
            o1, o2 = tf.split(tf.sigmoid(zo + tf.matmul(sbar, output_peephole)), 2, -1)
            y = tf.tanh(o1 * sbar + o2 * s)
            return k + 1, h_ta.write(k, y), s_ta.write(k, s)

        tas = [tf.TensorArray(tf.float32, size=cells, clear_after_read=False) for _ in range(2)]
        _, h_ta, _ = tf.while_loop(lambda k, *_: k < cells, body, [0, *tas])
        return h_ta.stack()

    variables = [layer.kernel, layer.recurrent_kernel, layer.peephole_kernel,
                 layer.output_peephole_kernel, layer.bias]

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = 0.0
            for d in range(4):
                weights = [tf.convert_to_tensor(v)[d] for v in variables]
                loss += tf.reduce_sum(one_direction(d, x, weights) ** 2)
        return tape.gradient(loss, [x] + variables)

    return lambda: [g.numpy() for g in step(x)]


def bench_config(tf, name: str, rounds: int, naive: bool) -> dict:
    batch, height, width, channels, units = CONFIGS[name]
    cells = batch * 4 * height * width
    flops = _harness.scan_flops(units, channels, batch * height * width)
    x = tf.random.normal((batch, height, width, channels))
    steps, first_call = {}, {}
    for projection, scan in VARIANTS:
        key = f"{projection}{scan.removeprefix('ops')}" if scan != "compiled" else f"{projection}+compiled"
        layer = _make_layer(tf, channels, units, input_projection=projection, **_scan_kwargs(scan))
        steps[key] = _training_step(tf, layer, x)
        first_call[key] = _harness.timed(steps[key])[1]
    times = _harness.interleaved(steps, rounds)
    variants = {}
    for key, measured in times.items():
        best = min(measured.wall)
        variants[key] = {
            "step_ms_min": round(best * 1e3, 2),
            "step_ms_median": round(statistics.median(measured.wall) * 1e3, 2),
            "first_call_s": round(first_call[key], 2),
            "cell_updates_per_s": round(cells / best),
            "gflops": round(flops / best / 1e9, 2),
        }
    default = _make_layer(tf, channels, units)
    result = {
        "shape": {"batch": batch, "height": height, "width": width, "channels": channels,
                  "units": units, "directions": 4},
        "cell_updates_per_step": cells,
        "counted_gflop_per_step": round(flops / 1e9, 4),
        "variants": variants,
        "auto_variant": (f"{default.input_projection_mode(False)}+compiled"
                         if default.scan_kernel_mode() == "compiled" else
                         f"{default.input_projection_mode(True)}+xla"),
        "best_variant": min(variants, key=lambda k: variants[k]["step_ms_min"]),
        "targets_cell_updates_per_s": TARGETS[name],
    }
    if naive:
        crop_h, crop_w = min(NAIVE_CROP[0], height), min(NAIVE_CROP[1], width)
        crop = x[:, :crop_h, :crop_w]
        step = naive_step(tf, default, crop)
        step()
        best = min(_harness.timed(step)[1] for _ in range(max(2, rounds // 2)))
        rate = batch * 4 * crop_h * crop_w / best
        result["naive_per_cell_loop"] = {
            "crop": [crop_h, crop_w], "step_ms_min": round(best * 1e3, 2),
            "cell_updates_per_s": round(rate),
        }
        result["speedup_vs_naive"] = round(
            variants[result["best_variant"]]["cell_updates_per_s"] / rate, 1
        )
    return result


def memory_child(threads: int, scan: str) -> dict:
    """In a fresh process with the BFC allocator: peak tensor memory of one L4 training step."""
    import resource

    tf = _harness.set_threads(threads)
    batch, height, width, channels, units = CONFIGS[MEMORY_CONFIG]
    layer = _make_layer(tf, channels, units, **_scan_kwargs(scan))
    step = _training_step(tf, layer, tf.random.normal((batch, height, width, channels)))
    step()
    tf.config.experimental.reset_memory_stats("CPU:0")
    step()
    info = tf.config.experimental.get_memory_info("CPU:0")
    return {
        "config": MEMORY_CONFIG, "scan": scan,
        "tf_peak_bytes": info["peak"],
        "tf_peak_mib": round(info["peak"] / 2**20, 1),
        "process_max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def measure_memory(threads: int) -> list[dict]:
    results = []
    for scan in MEMORY_VARIANTS:
        env = dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC="true", TF_CPP_MIN_LOG_LEVEL="2")
        results.append(_harness.run_child(__file__, ["--memory-child", scan, "--threads", str(threads)], env))
    return results


def measure(args: argparse.Namespace) -> dict:
    environment = _harness.tuned_env(args.tuned_env)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    tf = _harness.set_threads(args.threads)
    peak = _harness.matmul_peak_gflops(tf)
    result = {
        "machine": {"processor": platform.processor() or platform.machine(),
                    "cpu_model": _harness.cpu_model(), "threads": args.threads,
                    "environment": environment, "tensorflow": tf.__version__},
        "configs": {},
    }
    for name in args.configs.split(","):
        _harness.log(f"[{name}] measuring ...")
        result["configs"][name] = bench_config(tf, name, args.rounds, not args.no_naive)
    peak = max(peak, _harness.matmul_peak_gflops(tf))
    result["machine"]["matmul_1024_gflops"] = round(peak, 1)
    for config in result["configs"].values():
        for variant in config["variants"].values():
            variant["fraction_of_matmul_peak"] = round(variant["gflops"] / peak, 3)
    if not args.no_memory:
        _harness.log("[memory] measuring ...")
        result["memory"] = measure_memory(args.threads)
    _print_table(result)
    return result


def main(argv=None) -> int:
    parser = _harness.parser(__doc__, rounds=5, tuned_env=True)
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated subset of {list(CONFIGS)}")
    parser.add_argument("--no-naive", action="store_true", help="skip the naive per-cell loop")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak memory subprocesses")
    parser.add_argument("--memory-child", choices=MEMORY_VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        print(json.dumps(memory_child(args.threads, args.memory_child)))
        return 0
    return _harness.main(measure, args)


def _print_table(result: dict) -> None:
    machine = result["machine"]
    print(f"threads {machine['threads']}, environment {machine['environment']}, "
          f"matmul peak {machine['matmul_1024_gflops']} GFLOP/s")
    for name, config in result["configs"].items():
        target = config["targets_cell_updates_per_s"]["prototype"]
        for key, v in config["variants"].items():
            mark = " <- auto" if key == config["auto_variant"] else ""
            print(f"{name} {key:16s} {v['step_ms_min']:8.1f} ms  "
                  f"{v['cell_updates_per_s'] / 1e6:6.3f} M/s (prototype {target / 1e6:.2f})  "
                  f"{v['gflops']:6.1f} GFLOP/s = {100 * v['fraction_of_matmul_peak']:4.1f} % peak"
                  f"{mark}")
        if "naive_per_cell_loop" in config:
            naive = config["naive_per_cell_loop"]
            print(f"{name} naive per-cell loop on {naive['crop']}: "
                  f"{naive['cell_updates_per_s'] / 1e6:.4f} M/s; best variant "
                  f"{config['speedup_vs_naive']}x faster")
    for memory in result.get("memory", []):
        print(f"memory {memory['config']} {memory['scan']}: TF peak "
              f"{memory['tf_peak_mib']} MiB, process max RSS {memory['process_max_rss_mib']} MiB")


if __name__ == "__main__":
    sys.exit(main())
