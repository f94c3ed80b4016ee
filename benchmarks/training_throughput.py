"""Recognizer training throughput: whole training steps of the small and large presets on synthetic lines at the main job's height, batch budgets compared in one run, with a profile of each step's parts and the machine's matmul peak.

Each compared configuration (``--configs BUDGET:WINDOW[:PLANNER[:SCAN]],...``: the batch's pixel
budget, the width-sorting window of :func:`tfnhr.data.batches.similar_width_batches`, the packing
planner, ``xla`` by default, ``graph`` or ``numpy`` (the Python planner in ``tf.numpy_function``),
and the MDLSTM scan kernel, ``compiled`` (the C++ ops of :mod:`tfnhr.ops.scan_kernel`, the
default) or ``ops`` (the ``tf.while_loop`` of TensorFlow ops); default the main job's batch budget
(``tfnhr.config.choices.MAIN_JOB_BATCH_PIXELS``, 190,000 pixels of its 36-px lines) with random batches
(window 1, the default), TensorFlow-ops scan against compiled scan)
gets its own recognizer (same seed) and its own training dataset
(:func:`tfnhr.data.dataset.make_dataset` with ``default`` augmentation, as ``tfnhr train``);
the configurations' steps run interleaved, one step each per round, so that load from other
processes hits them alike. A step is timed whole: fetching the next batch from the tf.data pipeline
(augmentation, ragged batch) and one ``train_step`` (three packings, three MDLSTM levels, two
block convolutions, CTC, Adam). Figures: lines/s = the lines of the timed steps / their seconds (pixels/s
likewise, at the pool's mean pixels per line), the median step time and its range.

The profile times each part of a step alone on the budget's first batch (median of repeats):
the packing planner (three calls, the configuration's planner), pack + unpack forward and backward, each MDLSTM
level's scan forward and backward, the block convolutions, the per-pixel scores, CTC forward
and backward and the optimizer's update; "rest" is the measured step minus their sum. The
single-thread (and, with ``--threads 2``, two-thread) float32 matmul peak is measured in the
same process (1024 x 1024), and the scans' matmul FLOPs per step (from the computed cells of
the packed canvases) give their share of it.

    taskset -c 0 .venv/bin/python benchmarks/training_throughput.py --threads 1 --out t1.json
    .venv/bin/python benchmarks/training_throughput.py --threads 2 --out t2.json
    .venv/bin/python benchmarks/training_throughput.py --workers 2 --out w2.json   # Horovod

``--memory`` instead measures the peak RSS of one large-preset step on 8 lines scaled to 128 px
(IAM size) and the RSS over 1,000 small-preset steps (a leak test).

``--workers W`` (W >= 1) instead times whole epochs of ``horovod_jobs.train --task nhr`` under
``horovodrun`` on a synthetic line set written in the IAM layout (``--train-lines``), with W
single-threaded workers (placed by the OS, or with ``--pin`` each pinned to its own core)
against one worker with one and with ``W`` threads, for
each budget: median epoch training seconds after the first epoch, validation excluded. With
W >= 2 it also runs W single-worker jobs at once, apart (no collectives; with ``--pin`` each
pinned to its own core): what W workers of this job could reach if they waited for nothing;
and the W x 1 layout again at each of ``--cycle-times`` (Horovod's background cycle, ms; the job
sets 5 ms for itself on CPU hosts, Horovod's default is 1 ms) and with model averaging
(``--sync average``) at each of ``--average-every`` (steps between averagings; the workers step
on their own in between, so they wait for each other only at those steps and at epoch ends).
``--augment`` is the jobs' augmentation level (``none`` shows what the augmentation threads
take from the training threads when the workers fill every core).
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import _harness
from tfnhr.config.choices import AUGMENT_LEVELS, MAIN_JOB_BATCH_PIXELS, MAIN_JOB_BLOCKS, MAIN_JOB_HEIGHT


def parse_configs(text: str) -> list[tuple[int, int, str, str]]:
    """``"150000:1,300000:8:numpy:ops"`` -> ``[(150000, 1, "xla", "compiled"), (300000, 8, "numpy",
    "ops")]``: pixel budget, sorting window, packing planner (``tfnhr.ops.packing.PLANNERS``;
    default ``xla``), scan kernel (``compiled`` or ``ops``; default ``compiled``)."""
    configs = []
    for part in text.split(","):
        fields = part.split(":")
        planner = fields[2] if len(fields) > 2 and fields[2] else "xla"
        kernel = fields[3] if len(fields) > 3 else "compiled"
        if len(fields) > 4 or planner not in ("xla", "graph", "numpy") or kernel not in ("compiled", "ops"):
            raise argparse.ArgumentTypeError(
                f"expected BUDGET[:WINDOW[:xla|graph|numpy[:compiled|ops]]], got {part!r}")
        configs.append((int(fields[0]), int(fields[1]) if len(fields) > 1 and fields[1] else 1, planner, kernel))
    return configs


def parse_kernels(text: str) -> list[str]:
    """``"ops,compiled"`` -> ``["ops", "compiled"]`` (MDLSTM scan kernels)."""
    kernels = text.split(",")
    if not kernels or any(kernel not in ("compiled", "ops") for kernel in kernels):
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of compiled, ops; got {text!r}")
    return kernels


def synthetic_lines(count: int, seed: int):
    """``count`` synthetic training lines scaled to :data:`MAIN_JOB_HEIGHT` as a TextImageSet."""
    from tfnhr.data.synthetic import handwriting
    from tfnhr.data.images import scale_to_height
    from tfnhr.data.samples import TextImageSet

    examples = handwriting.generate(count, seed=seed, kind="lines", split="train")
    return TextImageSet([scale_to_height(image, MAIN_JOB_HEIGHT) for image, _ in examples],
                        [text for _, text in examples], [f"line{i}" for i in range(count)])


def compiled_step(tf, preset: str, charset, seed: int, planner: str = "xla", kernel: str = "compiled"):
    """A recognizer of ``preset`` (seeded, 2x2 blocks, Adam 0.005 with clipping 10 as ``tfnhr
    train``, its MDLSTMs packing with ``planner`` and scanning with ``kernel``) and its
    ``train_step`` as one ``tf.function`` over ``(images, labels)`` batches."""
    import keras

    from tfnhr.data.dataset import IMAGES_SPEC, LABELS_SPEC
    from tfnhr.models import build_recognizer

    keras.utils.set_random_seed(seed)
    model = build_recognizer(charset, preset=preset, block=MAIN_JOB_BLOCKS, input_height=MAIN_JOB_HEIGHT)
    for mdlstm in model.mdlstms:
        mdlstm.packing_planner, mdlstm.scan_kernel = planner, kernel
    model.compile(optimizer=keras.optimizers.Adam(0.005, clipnorm=10.0))
    return model, tf.function(model.train_step, input_signature=[(IMAGES_SPEC, LABELS_SPEC)])


def canvas_cells(images) -> int:
    """Computed cells (per direction) of the skewed scan over the packed canvases of ``images``."""
    from tfnhr.ops.packing import image_sizes, plan_packing

    layout = plan_packing(image_sizes(images))
    height, width = layout.canvas_height, layout.canvas_width
    return layout.num_canvases * height * (width + height - 1)


def median_seconds(function, repeats: int) -> float:
    function()
    return statistics.median(_harness.timed(function)[1] for _ in range(repeats))


def profile_step(tf, model, images, labels, repeats: int) -> tuple[dict, float]:
    """Seconds of each part of one training step on ``(images, labels)`` and the step's scan FLOPs."""
    from tfnhr.layers import MDLSTM2D
    from tfnhr.ops.graph_planner import plan_packing_graph
    from tfnhr.ops.packing import _plan_indices, _ragged_lengths, image_sizes_tensor, pack_ragged_graph, unpack

    planner = model.mdlstms[0].packing_planner
    graph_plan = tf.function(lambda sizes: plan_packing_graph(sizes[:, 0], sizes[:, 1], jit=planner == "xla"))
    parts, flops, features = {}, 0.0, images
    parts["planner"] = 0.0
    parts["pack/unpack"] = 0.0
    level = 0
    for layer in model.stages():
        if not isinstance(layer, MDLSTM2D):  # a stem or block convolution: "stem 1", "block conv 2"
            name = re.sub(r"(\d+)$", r" \1", layer.name).replace("_", " ")
            parts[name] = median_seconds(lambda c=layer, x=features: _layer_fb(tf, c, x), repeats)
            features = layer(features)
            continue
        mdlstm, level = layer, level + 1
        heights, row_widths = (t.numpy() for t in _ragged_lengths(features))
        if planner == "numpy":
            parts["planner"] += median_seconds(lambda h=heights, w=row_widths: _plan_indices(h, w, None, None), repeats)
        else:
            sizes = image_sizes_tensor(features)
            parts["planner"] += median_seconds(lambda s=sizes: graph_plan(s).canvas_shape.numpy(), repeats)

        @tf.function
        def pack_roundtrip(x):
            with tf.GradientTape() as tape:
                x, pixels = _watched(tape, x)
                canvas, _, indices = pack_ragged_graph(x, planner=planner)
                total = tf.reduce_sum(unpack(canvas, indices).flat_values)
            return tape.gradient(total, pixels)

        parts["pack/unpack"] += median_seconds(lambda x=features: pack_roundtrip(x).numpy(), repeats)
        canvas, valid, _ = pack_ragged_graph(features)
        scan = mdlstm._dense_fns[mdlstm.scan_kernel_mode(), False]
        params = mdlstm._params()
        mask = tf.cast(valid, canvas.dtype)

        @tf.function
        def scan_backward(x, mask=mask, scan=scan, mdlstm=mdlstm):
            with tf.GradientTape() as tape:
                tape.watch(x)
                total = tf.reduce_sum(scan(x, mask, mdlstm._params()) * 0.01)
            return tape.gradient(total, [x, *mdlstm.trainable_variables])

        forward = median_seconds(lambda x=canvas, s=scan, p=params: s(x, mask, p).numpy(), repeats)
        both = median_seconds(lambda x=canvas: [g.numpy() for g in scan_backward(x)], repeats)
        parts[f"scan {level} forward"] = forward
        parts[f"scan {level} backward"] = max(both - forward, 0.0)
        flops += _harness.scan_flops(mdlstm.units, features.shape[-1], canvas_cells(features))
        features = mdlstm(features)
    parts["scores"] = median_seconds(lambda x=features: _layer_fb(tf, model.scores, x), repeats)
    scores = tf.reduce_sum(model.scores(features), axis=1)

    @tf.function
    def ctc(s):
        with tf.GradientTape() as tape:
            s, values = _watched(tape, s)
            loss = model.ctc_loss(labels, s)
        return tf.convert_to_tensor(tape.gradient(loss, values))

    parts["CTC"] = median_seconds(lambda: ctc(scores).numpy(), repeats)
    variables = model.trainable_variables
    gradients = [tf.zeros_like(v) for v in variables]
    apply = tf.function(lambda: model.optimizer.apply(gradients, variables))
    parts["optimizer"] = median_seconds(apply, repeats)
    return parts, flops


def train_on(step, batch) -> int:
    """One training step on ``batch``; returns its line count."""
    step(batch)["loss"].numpy()
    return int(batch[0].shape[0])


def _watched(tape, ragged):
    """``ragged`` rebuilt on a watched copy of its values, and that copy."""
    values = ragged.flat_values + 0.0
    tape.watch(values)
    return ragged.with_flat_values(values), values


def _layer_fb(tf, layer, x) -> None:
    """Forward + backward of ``layer`` on ragged ``x`` (eager-compiled once per layer and shape)."""
    key = (id(layer), tuple(x.bounding_shape().numpy()))
    if key not in _LAYER_FB:
        @tf.function
        def fb(inputs):
            with tf.GradientTape() as tape:
                inputs, pixels = _watched(tape, inputs)
                total = tf.reduce_sum(layer(inputs).flat_values)
            # dense gradients (a stem's gradient reaches its ragged input as IndexedSlices)
            return [tf.convert_to_tensor(g) for g in tape.gradient(total, [pixels, *layer.trainable_variables])]
        _LAYER_FB[key] = fb
    [g.numpy() for g in _LAYER_FB[key](x)]


_LAYER_FB: dict = {}


def measure_steps(args: argparse.Namespace) -> dict:
    tf = _harness.set_threads(args.threads)

    from tfnhr.charset import Charset
    from tfnhr.data.augment import make_augmenter
    from tfnhr.data.batches import steps_per_epoch
    from tfnhr.data.dataset import make_dataset

    peak = {1: _harness.matmul_peak_gflops(tf)}
    data = synthetic_lines(args.lines, args.seed)
    charset = Charset.from_texts(data.texts)
    pixels = data.pixels()
    print(f"{len(data)} synthetic lines at {MAIN_JOB_HEIGHT} px: median width {np.median([i.shape[1] for i in data.images]):.0f} px, "
          f"{pixels.mean():,.0f} pixels per line; {args.threads} thread(s); matmul peak {peak[1]:.1f} GFLOP/s")
    report = {"threads": args.threads, "lines": len(data), "height": MAIN_JOB_HEIGHT, "matmul_peak_gflops": peak[1], "presets": {}}
    for preset in args.presets.split(","):
        steps, models, iterators, lines = {}, {}, {}, {}
        for config in args.configs:
            budget, window, planner, kernel = config
            model, step = compiled_step(tf, preset, charset, args.seed, planner, kernel)
            dataset = make_dataset(data, charset, budget, seed=args.seed, augment=make_augmenter("default", args.seed),
                                   sort_window=window)
            iterator = iter(dataset.repeat())
            models[config], iterators[config], lines[config] = model, iterator, []
            steps[config] = lambda step=step, iterator=iterator, done=lines[config]: done.append(
                train_on(step, next(iterator)))
        _harness.log(f"{preset}: timing {args.rounds} interleaved rounds of {len(steps)} configurations")
        times = _harness.interleaved(steps, rounds=args.rounds, warmup=args.warmup)
        results = {}
        for config, model in models.items():
            budget, *_ = config
            images, labels = next(iterators[config])
            step_wall = statistics.median(times[config].wall)
            trained = lines[config][args.warmup:]  # lines of each timed step
            lines_per_step = len(data) / steps_per_epoch(pixels, budget)  # the epoch's mean
            parts, flops = profile_step(tf, model, images, labels, args.profile_repeats)
            parts["rest"] = step_wall - sum(parts.values())
            results[label(config)] = {
                "batch_pixels": budget, "sort_window": config[1], "planner": config[2], "scan_kernel": config[3],
                "lines_per_step": lines_per_step, "step_seconds_median": step_wall,
                "step_seconds_range": [min(times[config].wall), max(times[config].wall)],
                "lines_per_second": sum(trained) / sum(times[config].wall),
                "pixels_per_second": sum(trained) * pixels.mean() / sum(times[config].wall),
                "profile_batch_lines": int(images.shape[0]), "profile_seconds": parts,
                "scan_gflops_per_step": flops / 1e9,
            }
        report["presets"][preset] = results
        print_steps(preset, results, peak[1], args.threads)
    return report


def label(config: tuple[int, int, str, str]) -> str:
    """``"150000px/w8"`` (``"150000px/w8/numpy"`` for another planner than XLA's, ``.../ops`` for
    the TensorFlow-ops scan): a configuration's name."""
    return (f"{config[0]}px/w{config[1]}" + ("" if config[2] == "xla" else f"/{config[2]}")
            + ("" if config[3] == "compiled" else f"/{config[3]}"))


def print_steps(preset: str, results: dict, peak: float, threads: int) -> None:
    configs = list(results)
    print(f"\n{preset} preset, {threads} thread(s): whole training steps (median of rounds, range)")
    print(f"{'batching':>14s} {'lines/step':>10s} {'step s':>16s} {'lines/s':>8s} {'pixels/s':>10s}")
    for name, r in results.items():
        low, high = r["step_seconds_range"]
        print(f"{name:>14s} {r['lines_per_step']:10.1f} {r['step_seconds_median']:6.3f} ({low:.2f}-{high:.2f}) "
              f"{r['lines_per_second']:8.1f} {r['pixels_per_second']:10,.0f}")
    base = results[configs[0]]["lines_per_second"]
    for name in configs[1:]:
        print(f"lines/s with {name} / with {configs[0]}: {results[name]['lines_per_second']:.1f} / {base:.1f} "
              f"= {results[name]['lines_per_second'] / base:.2f}x")
    print("\nprofile of one step (seconds, share of the measured median step)")
    print(f"{'part':22s}" + "".join(f"{name:>17s} " for name in configs))
    for part in results[configs[0]]["profile_seconds"]:
        row = ""
        for name in configs:
            seconds = results[name]["profile_seconds"][part]
            row += f"{seconds:10.3f} {seconds / results[name]['step_seconds_median']:6.1%} "
        print(f"{part:22s}{row}")
    for name, r in results.items():
        achieved = r["scan_gflops_per_step"] / r["step_seconds_median"]
        print(f"{name}: profiled batch of {r['profile_batch_lines']} lines; scan matmul work "
              f"{r['scan_gflops_per_step']:.2f} GFLOP per step = {achieved:.1f} GFLOP/s over the whole step, "
              f"{achieved / peak:.1%} of the matmul peak")


WORKER_RUNS = ((1, 1), (1, 2), (2, 1))
"""``(workers, threads per worker)`` of ``--workers 2``: one single-threaded worker, one worker
with two threads, two single-threaded workers (each pinned to its own core)."""


def apart(jobs: int, job_argv: list[str], env: dict, folder: Path, pin: bool) -> list[list[float]]:
    """``jobs`` single-worker runs of ``train.py JOB_ARGV`` (its ``--out`` made per job) started
    at once (``pin``: each pinned to its own core; else placed by the OS): each one's training
    seconds per epoch."""
    import horovod_scaling

    cpus = sorted(os.sched_getaffinity(0))[:jobs]
    if len(cpus) < jobs:
        raise SystemExit(f"{jobs} jobs apart need {jobs} cores; this process may use {len(cpus)}")
    out = job_argv.index("--out") + 1

    def one(job: int) -> list[float]:
        (folder / f"job{job}").mkdir()
        argv = [*job_argv[:out], str(folder / f"job{job}" / "out"), *job_argv[out + 1:]]
        return horovod_scaling.launch(1, argv, env, folder / f"job{job}", pin_cores=pin, cpus=[cpus[job]])

    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(one, range(jobs)))


def measure_workers(args: argparse.Namespace) -> dict:
    """Whole epochs of ``horovod_jobs.train --task nhr`` per configuration and worker layout."""
    import horovod_scaling

    from tfnhr.data.synthetic import iam_writer

    env = _harness.single_threaded_child_env()
    # (workers, threads per worker, apart, Horovod cycle ms or None: the job's, averaging period or None: gradients)
    runs = [(*run, False, None, None) for run in WORKER_RUNS if run[0] * run[1] <= args.workers] + (
        [(args.workers, 1, False, None, None)] if args.workers > 2 else [])
    if args.workers > 1:
        runs += ([(args.workers, 1, False, cycle, None) for cycle in args.cycle_times]
                 + [(args.workers, 1, False, None, every) for every in args.average_every]
                 + [(args.workers, 1, True, None, None)])
    report = {"train_lines": args.train_lines, "epochs": args.epochs, "augment": args.augment, "runs": {}}
    with tempfile.TemporaryDirectory(prefix="training_throughput_") as temporary:
        root = Path(temporary)
        data = root / "lines"
        iam_writer.write_iam_layout(data, {"train": args.train_lines, "val": 20, "test": 2}, kind="lines",
                                   seed=args.seed, progress=False)
        for preset in args.presets.split(","):
            for config in args.configs:
                # the Horovod job plans with the default (XLA) planner and scans with the default kernel
                budget, window, *_ = config
                job = ["--task", "nhr", "--data", str(data), "--preset", preset, "--block",
                       *(f"{h}x{w}" for h, w in MAIN_JOB_BLOCKS), "--height",
                       str(MAIN_JOB_HEIGHT), "--batch-pixels", str(budget), "--sort-window", str(window),
                       "--epochs", str(args.epochs), "--seed", str(args.seed), "--augment", args.augment, "--quiet"]
                for (workers, threads, separate, cycle, every), kernel in itertools.product(runs, args.scan_kernels):
                    name = (f"{preset} {label(config)} {workers}x{threads}{' apart' if separate else ''}"
                            f"{'' if cycle is None else f' cycle {cycle:g}ms'}"
                            f"{'' if every is None else f' average/{every}'} {kernel}")
                    folder = root / name.replace(" ", "_").replace("/", "_")
                    folder.mkdir()
                    run_env = {**env, "TF_NUM_INTRAOP_THREADS": str(threads), "TF_NUM_INTEROP_THREADS": str(threads),
                               "TFNHR_SCAN_KERNEL": kernel, **({} if cycle is None else {"HOROVOD_CYCLE_TIME": f"{cycle:g}"})}
                    argv = [*job, "--threads", str(threads), "--out", str(folder / "out"),
                            *([] if every is None else ["--sync", "average", "--average-every", str(every)])]
                    started = time.monotonic()
                    if separate:
                        per_job = apart(workers, argv, run_env, folder, pin=args.pin)
                    else:
                        per_job = [horovod_scaling.launch(workers, argv, run_env, folder,
                                                          pin_cores=args.pin and threads == 1)]
                    # lines/s of all jobs together; one Horovod job trains every line once per epoch
                    rate = sum(args.train_lines / statistics.median(epochs[1:]) for epochs in per_job)
                    report["runs"][name] = {"preset": preset, "batch_pixels": budget, "sort_window": window,
                                            "scan_kernel": kernel, "augment": args.augment,
                                            "workers": workers, "threads": threads, "apart": separate,
                                            "horovod_cycle_ms": cycle, "average_every": every,
                                            "epoch_train_seconds": per_job, "lines_per_second": rate,
                                            "job_seconds": time.monotonic() - started}
                    print(f"{name:43s} {rate:7.1f} lines/s  (epochs "
                          f"{'; '.join(', '.join(f'{s:.1f}' for s in epochs) for epochs in per_job)} s)", flush=True)
    print_workers(report["runs"])
    return report


def print_workers(runs: dict) -> None:
    print(f"\n{'run':43s} {'lines/s':>8s} {'vs 1x1':>7s}")
    base = {}
    for name, run in runs.items():
        key = (run["preset"], run["batch_pixels"], run["sort_window"], run["scan_kernel"])
        if (run["workers"], run["threads"]) == (1, 1):
            base[key] = run["lines_per_second"]
        ratio = run["lines_per_second"] / base[key] if key in base else float("nan")
        print(f"{name:43s} {run['lines_per_second']:8.1f} {ratio:6.2f}x")
    one_process = [run for run in runs.values() if run["workers"] == 1 and run["threads"] > 1]
    many_workers = [run for run in runs.values() if run["workers"] > 1 and run["threads"] == 1 and not run["apart"]
                    and run["horovod_cycle_ms"] is None and run["average_every"] is None]
    if one_process and many_workers:
        before, after = one_process[_ops_first(one_process)], many_workers[-1]
        print(f"\none process x {before['threads']} threads, {before['batch_pixels']}px/w{before['sort_window']}, "
              f"{before['scan_kernel']} scan (tfnhr train before --threads) -> {after['workers']} workers x 1 thread, "
              f"{after['batch_pixels']}px/w{after['sort_window']}, {after['scan_kernel']} scan: "
              f"{before['lines_per_second']:.1f} -> {after['lines_per_second']:.1f} lines/s = "
              f"{after['lines_per_second'] / before['lines_per_second']:.2f}x")


def _ops_first(runs: list[dict]) -> int:
    """Index of the first run with the TensorFlow-ops scan (the set-up before the compiled one)."""
    return next((i for i, run in enumerate(runs) if run["scan_kernel"] == "ops"), 0)


IAM_HEIGHT = 128
"""Lines of ``--memory``'s peak step are scaled to this height: IAM line images at full
resolution are about 100-150 px high."""


def measure_memory(args: argparse.Namespace) -> dict:
    """RSS over ``--leak-steps`` small-preset steps on a cycle of different batches (a leak shows as
    growth after warm-up), then the peak RSS of one large-preset training step on IAM-size lines
    (second: the allocator keeps what that step took, which would hide a leak)."""
    tf = _harness.set_threads(args.threads)

    from tfnhr.charset import Charset
    from tfnhr.data.dataset import ragged_batch
    from tfnhr.data.images import scale_to_height

    data = synthetic_lines(max(args.memory_lines, 40), args.seed)
    charset = Charset.from_texts(data.texts)
    _, step = compiled_step(tf, "small", charset, args.seed)
    batches = [ragged_batch(data.images[i:i + 2], [charset.encode(t) for t in data.texts[i:i + 2]])
               for i in range(0, 40, 2)]
    rss = []
    for number in range(1, args.leak_steps + 1):
        step(batches[number % len(batches)])["loss"].numpy()
        if number % max(1, args.leak_steps // 10) == 0:
            rss.append((number, _harness.status_kb("VmRSS") / 1024))
            _harness.log(f"leak test: step {number}, RSS {rss[-1][1]:,.0f} MiB")
    first, last = rss[0], rss[-1]
    print(f"small preset, {args.leak_steps} steps on a cycle of {len(batches)} two-line batches: RSS "
          f"{first[1]:,.0f} MiB after step {first[0]}, {last[1]:,.0f} MiB after step {last[0]} "
          f"({last[1] - first[1]:+,.1f} MiB)")

    big = [scale_to_height(image, IAM_HEIGHT) for image in data.images[:args.memory_lines]]
    batch = ragged_batch(big, [charset.encode(text) for text in data.texts[:args.memory_lines]])
    _, step = compiled_step(tf, "large", charset, args.seed)
    before = _harness.status_kb("VmHWM")
    _harness.log(f"memory: one large-preset step on {len(big)} lines of {IAM_HEIGHT} px")
    step(batch)["loss"].numpy()
    step(batch)["loss"].numpy()
    peak = _harness.status_kb("VmHWM")
    sizes = [image.shape for image in big]
    print(f"large preset, {len(big)} lines of {IAM_HEIGHT} x {min(w for _, w in sizes)}-{max(w for _, w in sizes)} px "
          f"({sum(h * w for h, w in sizes):,} pixels): peak RSS {peak / 1024:,.0f} MiB "
          f"(+{(peak - before) / 1024:,.0f} MiB over the process before the step)")

    return {"peak_step": {"preset": "large", "lines": len(big), "height": IAM_HEIGHT, "sizes": sizes,
                          "peak_rss_mib": peak / 1024, "rss_before_mib": before / 1024},
            "leak": {"preset": "small", "steps": args.leak_steps, "rss_mib": rss,
                     "growth_mib": last[1] - first[1]}}


def measure(args: argparse.Namespace) -> dict:
    if args.memory:
        return measure_memory(args)
    return measure_workers(args) if args.workers else measure_steps(args)


def main(argv=None) -> int:
    parser = _harness.parser(__doc__, rounds=10)
    parser.add_argument("--presets", default="small,large", help="comma-separated recognizer presets")
    parser.add_argument("--configs", type=parse_configs,
                        default=[(MAIN_JOB_BATCH_PIXELS, 1, "xla", "ops"), (MAIN_JOB_BATCH_PIXELS, 1, "xla", "compiled")],
                        help="comma-separated BUDGET:WINDOW[:PLANNER[:SCAN]] configurations (pixels per batch, "
                             "width-sorting window in batches, 1 = random batches; packing planner xla|graph|numpy, "
                             "default xla; MDLSTM scan kernel compiled|ops, default compiled); the first is the base "
                             f"of the ratios (default {MAIN_JOB_BATCH_PIXELS}:1:xla:ops,{MAIN_JOB_BATCH_PIXELS}:1)")
    parser.add_argument("--lines", type=int, default=330, help="synthetic training lines in the pool")
    parser.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    parser.add_argument("--profile-repeats", type=int, default=5, help="repeats of each profiled part")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=0,
                        help="time whole Horovod epochs instead: 1 worker x 1 thread, 1 x 2 threads, 2 x 1 thread "
                             "(and W x 1 for W > 2); 0 (default): steps in this process")
    parser.add_argument("--pin", action="store_true",
                        help="--workers: pin each single-threaded worker to its own core (default: the OS places "
                             "them, as the main job does)")
    parser.add_argument("--train-lines", type=int, default=600, help="--workers: training lines per epoch")
    parser.add_argument("--epochs", type=int, default=4, help="--workers: epochs per run (the first is not counted)")
    parser.add_argument("--cycle-times", type=lambda text: [float(part) for part in text.split(",") if part],
                        default=[1.0], help="--workers: Horovod cycle times (ms) to run the W x 1 layout at too, "
                        "beside the job's own (Horovod's default is 1; empty: none)")
    parser.add_argument("--average-every", type=lambda text: [int(part) for part in text.split(",") if part],
                        default=[16], help="--workers: run the W x 1 layout with model averaging too (--sync "
                        "average), once per comma-separated period in steps (default 16, the job's; empty: none)")
    parser.add_argument("--augment", choices=AUGMENT_LEVELS, default="default",
                        help="--workers: the jobs' augmentation level")
    parser.add_argument("--scan-kernels", type=parse_kernels, default=["compiled"],
                        help="--workers: comma-separated MDLSTM scan kernels to run every layout with "
                             "(compiled, ops; set through TFNHR_SCAN_KERNEL; default compiled)")
    parser.add_argument("--memory", action="store_true",
                        help="measure memory instead: the peak RSS of a large-preset step on IAM-size lines and "
                             "RSS over --leak-steps small-preset steps")
    parser.add_argument("--memory-lines", type=int, default=8, help="--memory: lines of the peak step")
    parser.add_argument("--leak-steps", type=int, default=1000, help="--memory: steps of the leak test")
    args = parser.parse_args(argv)
    return _harness.main(measure, args)


if __name__ == "__main__":
    sys.exit(main())
