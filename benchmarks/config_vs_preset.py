"""Training-step time of the shipped ``small.json`` config network vs the hand-built ``small`` preset
recognizer, with the same weights, on the same batch, in one run.

Both compute the same function (tests/tfnhr/network/test_config_networks.py checks it bit for bit); this
measures what describing the network in a file costs: the ``ConfigNetwork`` walks its planned
layer graph inside ``call``, the ``Recognizer`` has the sequence written out. The batch is
``--batch`` random ink images of height ``--height`` and widths drawn from 8..24 times the height
(text lines), labels of 1 per 8 columns. Steps of the two models alternate (``--rounds`` each,
after ``--warmup`` untimed ones that trace); the figure is the median wall seconds per step.

    python benchmarks/config_vs_preset.py --threads 1 --out build/bench/config_vs_preset.json
"""

from __future__ import annotations

import argparse
import statistics
import sys

import _harness


def measure(args: argparse.Namespace) -> dict:
    import keras
    import numpy as np

    tf = _harness.set_threads(args.threads)
    from tfnhr.charset import Charset
    from tfnhr.models import build_config_network, build_recognizer, copy_recognizer_weights
    from tfnhr.network import load_config

    rng = np.random.default_rng(0)
    charset = Charset.from_texts(["abcdefghijklmnopqrstuvwxyz "])
    widths = rng.integers(8 * args.height, 24 * args.height, size=args.batch)
    images = tf.ragged.stack([tf.RaggedTensor.from_tensor(tf.constant(
        rng.uniform(size=(args.height, int(w), 1)).astype(np.float32))) for w in widths])
    labels = tf.ragged.constant([rng.integers(1, charset.num_classes, size=int(w) // 8 // 16 + 1).tolist()
                                 for w in widths], dtype=tf.int32)
    preset = build_recognizer(charset, preset="small", block=(2, 4))
    config = build_config_network(load_config("small").network, charset)
    copy_recognizer_weights(preset, config)
    data = iter(lambda: (images, labels), None)
    steps = {}
    for name, model in (("preset", preset), ("config", config)):
        model.compile(optimizer=keras.optimizers.Adam(0.005, global_clipnorm=10.0))
        model.make_train_function()
        steps[name] = lambda step=model.train_function: float(step(data)["loss"])
    times = {name: measured.wall for name, measured in _harness.interleaved(steps, args.rounds, args.warmup).items()}
    seconds = {name: statistics.median(values) for name, values in times.items()}
    ratio = seconds["config"] / seconds["preset"]
    pixels = int(args.height * widths.sum())
    for name, value in seconds.items():
        print(f"{name:7s} {value:7.3f} s/step  ({pixels / value:,.0f} px/s)")
    print(f"config / preset step time: {ratio:.3f}")
    return {"batch": args.batch, "height": args.height, "pixels_per_step": pixels, "threads": args.threads,
            "rounds": args.rounds, "seconds_per_step": seconds, "all_seconds": times, "config_over_preset": ratio}


def main(argv=None) -> int:
    parser = _harness.parser(__doc__, rounds=5)
    parser.add_argument("--batch", type=int, default=8, help="line images per step")
    parser.add_argument("--height", type=int, default=32, help="image height (px)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (tracing)")
    return _harness.main(measure, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
