"""GPU readiness check: devices, MDLSTM2D forward + backward (L1-L4), recognizer training steps (small and large presets, packed and padded batches, mixed precision off and on) and the export's serving latency, each on every device TensorFlow sees (GPU and CPU), in one call.

Run it through ``scripts/gpu_check.sh`` (which picks the venv). On a CPU-only machine it reports
the CPU alone; CI runs it that way with ``--quick`` so that it cannot rot. A measurement that
fails is recorded with its error (``"error"`` in the JSON, ``FAILED`` in the table) and the check
goes on, so that one call shows everything that breaks on a new machine; the exit status is then 1.

Figures: medians of ``--repeats`` timed calls after a warm-up call (tracing, XLA compilation);
MDLSTM cell updates/s = ``B * 4 directions * H * W / step``; training lines/s = lines of the
batch / step; serving: wall milliseconds of one ``recognize`` signature call on 1 and on 16
encoded line images (PNG), p50 and max.

    scripts/gpu_check.sh --out gpu_check.json          # full (under 8 minutes on one H200 host)
    scripts/gpu_check.sh --quick                       # CI: small sizes, CPU only here
"""

from __future__ import annotations

import contextlib
import io
import statistics
import sys
import tempfile
import time
import traceback

import numpy as np

import _harness
from mdlstm_speed import CONFIGS as MDLSTM_CONFIGS  # name: (batch, height, width, input channels, units)

QUICK_WIDTH = 32
"""``--quick``: every MDLSTM config and training line is cut to this many columns (px)."""
LINE_HEIGHT = 32
"""Training lines' height (px): the main job's."""


def median_ms(function, repeats: int) -> tuple[float, float]:
    """``(median, max)`` wall milliseconds of ``repeats`` calls after one untimed warm-up call."""
    function()
    times = [_harness.timed(function)[1] * 1e3 for _ in range(repeats)]
    return statistics.median(times), max(times)


def attempt(report: dict, key: str, measure) -> None:
    """``report[key] = measure()``, or ``{"error": ...}`` (and the traceback on stderr) if it fails."""
    try:
        report[key] = measure()
    except Exception as error:  # noqa: BLE001  (a readiness check records every failure and goes on)
        traceback.print_exc()
        report[key] = {"error": f"{type(error).__name__}: {error}"[:500]}


def device_list(tf) -> dict:
    gpus = tf.config.list_physical_devices("GPU")
    details = [tf.config.experimental.get_device_details(gpu) for gpu in gpus]
    return {"built_with_cuda": tf.test.is_built_with_cuda(), "gpus": [
        {"name": gpu.name, **{key: str(value) for key, value in detail.items()}} for gpu, detail in zip(gpus, details)],
        "cpus": [cpu.name for cpu in tf.config.list_physical_devices("CPU")]}


def mdlstm_step(tf, device: str, config: tuple, repeats: int) -> dict:
    """Forward + backward of a 4-directional MDLSTM2D on a dense batch on ``device``."""
    from tfnhr.layers import MDLSTM2D

    batch, height, width, channels, units = config
    with tf.device(device):
        layer = MDLSTM2D(units)
        x = tf.random.stateless_uniform([batch, height, width, channels], seed=[1, 2])
        layer.build(x.shape)

        @tf.function
        def step(inputs):
            with tf.GradientTape() as tape:
                tape.watch(inputs)
                total = tf.reduce_sum(layer(inputs))
            return tape.gradient(total, [inputs, *layer.trainable_variables])

        median, worst = median_ms(lambda: [g.numpy() for g in step(x)], repeats)
    return {"config": list(config), "ms": median, "max_ms": worst,
            "cell_updates_per_s": batch * 4 * height * width / (median / 1e3)}


def line_batch(count: int, width_limit: int | None):
    """``count`` synthetic lines scaled to :data:`LINE_HEIGHT` (cut to ``width_limit`` columns) and
    their texts, as a ragged image batch and labels, with the charset."""
    from tfnhr.charset import Charset
    from tfnhr.data.synthetic import handwriting
    from tfnhr.data.dataset import ragged_batch
    from tfnhr.data.images import scale_to_height

    examples = handwriting.generate(count, seed=0, kind="lines", split="train")
    images = [scale_to_height(image, LINE_HEIGHT)[:, :width_limit] for image, _ in examples]
    texts = [text[:max(1, image.shape[1] // 16)] for (_, text), image in zip(examples, images)]
    charset = Charset.from_texts(texts)
    images, labels = ragged_batch(images, [charset.encode(text) for text in texts])
    return images, labels, charset


def training_step(tf, device: str, preset: str, packing: str, mixed: bool, batch, repeats: int) -> dict:
    """One ``train_step`` (forward, CTC, backward, Adam) of a fresh recognizer on ``device``."""
    import keras

    from tfnhr.models import build_recognizer
    from tfnhr.models.precision import dtype_policy, mixed_policy_name

    images, labels, charset = batch
    with tf.device(device), dtype_policy(mixed_policy_name() if mixed else None):
        keras.utils.set_random_seed(0)
        model = build_recognizer(charset, preset=preset, block=((2, 2), (2, 2)), packing=packing,
                                 input_height=LINE_HEIGHT)
        model.compile(optimizer=keras.optimizers.Adam(0.005, clipnorm=10.0), jit_compile=False)  # as tfnhr train
        step = tf.function(model.train_step)
        median, worst = median_ms(lambda: float(step((images, labels))["loss"]), repeats)
    return {"ms": median, "max_ms": worst, "lines_per_s": int(images.nrows()) / (median / 1e3),
            "policy": model.dtype_policy.name}


def serving_latency(tf, batch, repeats: int) -> dict:
    """Export an (untrained) small recognizer and time its ``recognize`` signature on PNG lines."""
    from PIL import Image

    from tfnhr.serving.export import export_recognizer
    from tfnhr.models import build_recognizer

    images, _, charset = batch
    pngs = []
    for image in images.to_list():
        buffer = io.BytesIO()
        gray = np.round(255 * (1 - np.asarray(image, np.float32)[..., 0])).astype(np.uint8)
        Image.fromarray(gray).save(buffer, "PNG")
        pngs.append(buffer.getvalue())
    model = build_recognizer(charset, preset="small", block=((2, 2), (2, 2)), input_height=LINE_HEIGHT)
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as folder:
        started = time.perf_counter()
        path = export_recognizer(model, folder)
        export_seconds = time.perf_counter() - started
        recognize = tf.saved_model.load(str(path)).signatures["recognize"]
        result = {"export_seconds": export_seconds}
        for count in (1, 16):
            request = tf.constant((pngs * 16)[:count])
            median, worst = median_ms(lambda: recognize(images=request)["text"].numpy(), repeats)
            result[f"batch_{count}"] = {"p50_ms": median, "max_ms": worst}
    return result


def measure(args) -> dict:
    tf = _harness.set_threads(args.threads)
    report = {"quick": args.quick, "threads": args.threads}
    attempt(report, "devices", lambda: device_list(tf))
    devices = ["/CPU:0"] + (["/GPU:0"] if tf.config.list_physical_devices("GPU") else [])
    width = QUICK_WIDTH if args.quick else None
    configs = {name: (b, h, w if width is None else min(w, width), c, u) for name, (b, h, w, c, u) in MDLSTM_CONFIGS.items()}
    batch = line_batch(4 if args.quick else 16, width)
    presets = ("small",) if args.quick else ("small", "large")
    for device in devices:
        _harness.log(f"{device}: MDLSTM2D forward + backward")
        for name, config in configs.items():
            attempt(report, f"mdlstm {name} {device}", lambda: mdlstm_step(tf, device, config, args.repeats))
        for preset in presets:
            for packing in ("examples", "pad"):
                for mixed in (False, True):
                    _harness.log(f"{device}: training step, {preset}, {packing}, mixed precision {mixed}")
                    attempt(report, f"train {preset} {packing} {'mixed' if mixed else 'float32'} {device}",
                            lambda: training_step(tf, device, preset, packing, mixed, batch, args.repeats))
    _harness.log("export and serving latency")
    attempt(report, "serving", lambda: serving_latency(tf, batch, args.repeats))
    print_report(report, devices)
    return report


def print_report(report: dict, devices: list[str]) -> None:
    gpus = report["devices"].get("gpus", []) if "error" not in report["devices"] else []
    print(f"devices: {', '.join(devices)}; GPUs: {[gpu.get('device_name', gpu['name']) for gpu in gpus] or 'none'}; "
          f"TensorFlow built with CUDA: {report['devices'].get('built_with_cuda')}")
    print(f"\n{'measurement':48s} {'median ms':>10s} {'max ms':>8s} {'rate':>16s}")
    for key, value in report.items():
        if not isinstance(value, dict) or key in ("devices", "serving"):
            continue
        if "error" in value:
            print(f"{key:48s} FAILED: {value['error']}")
            continue
        rate = (f"{value['cell_updates_per_s'] / 1e6:8.2f} Mcells/s" if "cell_updates_per_s" in value
                else f"{value['lines_per_s']:8.1f} lines/s")
        print(f"{key:48s} {value['ms']:10.1f} {value['max_ms']:8.1f} {rate:>16s}")
    serving = report["serving"]
    if "error" in serving:
        print(f"serving: FAILED: {serving['error']}")
    else:
        print(f"\nexport {serving['export_seconds']:.1f} s; recognize signature: 1 line p50 {serving['batch_1']['p50_ms']:.1f} ms "
              f"(max {serving['batch_1']['max_ms']:.1f}), 16 lines p50 {serving['batch_16']['p50_ms']:.1f} ms "
              f"(max {serving['batch_16']['max_ms']:.1f})")


def failures(report: dict) -> list[str]:
    """The measurements of ``report`` that failed."""
    return [key for key, value in report.items() if isinstance(value, dict) and "error" in value]


def main(argv=None) -> int:
    parser = _harness.parser(__doc__, threads=0, threads_help="TensorFlow threads (0: all cores)")
    parser.add_argument("--quick", action="store_true", help=f"small sizes ({QUICK_WIDTH}-px-wide layers and lines, "
                                                             "small preset only): the CI smoke run")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per measurement")
    args = parser.parse_args(argv)
    with contextlib.redirect_stdout(sys.stdout if args.out else sys.stderr):  # stdout: the JSON alone without --out
        report = measure(args)
        failed = failures(report)
        if failed:
            print(f"\n{len(failed)} measurement(s) failed: {', '.join(failed)}")
    _harness.write_report(report, args.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
