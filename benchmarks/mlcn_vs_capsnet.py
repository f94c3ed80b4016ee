"""Training-step time and parameters of CapsNet vs MLCN (2 × width 4, 8 × width 4) on 28×28×1, in one run.

Each model trains ``--steps`` timed steps (after ``--warmup`` untimed ones) of ``model.fit``'s
own compiled step on random images with 10 classes; the figure is the median seconds per step.
Rosario et al. 2019 report MLCN 2–11× faster per epoch than CapsNet (Sabour et al. 2017) at
similar accuracy; the design notes measured the public Keras-2 code here at 2.07 s (CapsNet),
0.295 s (MLCN 2×4) and 1.15 s (MLCN 8×4) per step of batch 100 on one thread.

    python benchmarks/mlcn_vs_capsnet.py --threads 1 --out build/bench/mlcn_vs_capsnet.json
"""

from __future__ import annotations

import argparse
import statistics
import sys

import _harness

from capsnet.environment import prefer_onednn

MODELS = {"capsnet": None, "mlcn_2x4": ["4x1"] * 2, "mlcn_8x4": ["4x1"] * 8}
REFERENCE_SECONDS_PER_STEP = {"capsnet": 2.07, "mlcn_2x4": 0.295, "mlcn_8x4": 1.15}  # public code, batch 100


def seconds_per_step(model, batch: int, steps: int, warmup: int) -> float:
    """Median wall seconds of one compiled training step on a fixed random batch."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    images = tf.constant(rng.uniform(size=(batch, 28, 28, 1)).astype(np.float32))
    labels = tf.constant(rng.integers(0, 10, size=batch).astype(np.int32))
    model.compile(optimizer="adam")
    model.make_train_function()
    data = iter(lambda: (images, labels), None)
    times = _harness.interleaved({"step": lambda: float(model.train_function(data)["loss"])}, steps, warmup)
    return statistics.median(times["step"].wall)


def measure(args: argparse.Namespace) -> dict:
    onednn = prefer_onednn()
    _harness.set_threads(args.threads)
    from capsnet.models import build_capsnet, build_mlcn

    results = {}
    for name in args.models.split(","):
        lanes = MODELS[name]
        model = build_capsnet((28, 28, 1), 10) if lanes is None else build_mlcn((28, 28, 1), 10, lanes)
        seconds = seconds_per_step(model, args.batch, args.steps, args.warmup)
        results[name] = {"params": model.count_params(), "seconds_per_step": seconds,
                         "reference_seconds_per_step": REFERENCE_SECONDS_PER_STEP[name]}
        print(f"{name:9s} {model.count_params():>10,d} params  {seconds:7.3f} s/step "
              f"(public code {REFERENCE_SECONDS_PER_STEP[name]:.3f} s/step)", flush=True)
    if "capsnet" in results:
        for name, figures in results.items():
            if name != "capsnet":
                figures["speedup_vs_capsnet"] = results["capsnet"]["seconds_per_step"] / figures["seconds_per_step"]
                print(f"{name}: {figures['speedup_vs_capsnet']:.2f}x faster per step than CapsNet")
    return {"onednn": onednn, "batch": args.batch, "threads": args.threads, "steps": args.steps, "models": results}


def main(argv=None) -> int:
    parser = _harness.parser(__doc__)
    parser.add_argument("--batch", type=int, default=100, help="examples per step (the reference used 100)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per model")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (tracing, allocation)")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated subset of {list(MODELS)}")
    return _harness.main(measure, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
