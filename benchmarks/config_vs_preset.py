"""Training-step time of the shipped ``small.json`` config network vs the hand-built ``small`` preset
recognizer, with the same weights, on the same batch, in one run.

Both compute the same function (tests/test_network_config.py checks it bit for bit); this
measures what describing the network in a file costs: the ``ConfigNetwork`` walks its planned
layer graph inside ``call``, the ``Recognizer`` has the sequence written out. The batch is
``--batch`` random ink images of height ``--height`` and widths drawn from 8..24 times the height
(text lines), labels of 1 per 8 columns. Steps of the two models alternate (``--rounds`` each,
after ``--warmup`` untimed ones that trace); the figure is the median wall seconds per step.

    python benchmarks/config_vs_preset.py --threads 1 --out build/bench/config_vs_preset.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8, help="line images per step")
    parser.add_argument("--height", type=int, default=32, help="image height (px)")
    parser.add_argument("--rounds", type=int, default=5, help="timed steps per model")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (tracing)")
    parser.add_argument("--threads", type=int, default=1, help="TensorFlow intra- and inter-op threads")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    import keras
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    from tfnhr.charset import Charset
    from tfnhr.model import build_recognizer
    from tfnhr.network import build_config_network, copy_recognizer_weights, load_config

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
    steps = {}
    for name, model in (("preset", preset), ("config", config)):
        model.compile(optimizer=keras.optimizers.Adam(0.005, global_clipnorm=10.0))
        model.make_train_function()
        steps[name] = model.train_function
    data = iter(lambda: (images, labels), None)
    times: dict[str, list[float]] = {name: [] for name in steps}
    for round_number in range(args.warmup + args.rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            float(step(data)["loss"])
            if round_number >= args.warmup:
                times[name].append(time.perf_counter() - start)
    seconds = {name: statistics.median(values) for name, values in times.items()}
    ratio = seconds["config"] / seconds["preset"]
    pixels = int(args.height * widths.sum())
    for name, value in seconds.items():
        print(f"{name:7s} {value:7.3f} s/step  ({pixels / value:,.0f} px/s)")
    print(f"config / preset step time: {ratio:.3f}")
    report = {"batch": args.batch, "height": args.height, "pixels_per_step": pixels, "threads": args.threads,
              "rounds": args.rounds, "seconds_per_step": seconds, "all_seconds": times, "config_over_preset": ratio}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
