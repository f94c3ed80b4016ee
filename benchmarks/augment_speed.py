"""What training-time augmentation costs: lines/s of the augmenter alone at each level, and the
small recognizer's training throughput with and without the default augmentation, in one run.

What it measures, on ``--lines`` synthetic lines (``tfnhr.data.synthetic.handwriting.generate``, training
fonts, scaled to ``--height`` px keeping the aspect, as ``tfnhr train --height`` loads them):

1. **augmentation alone**: :class:`tfnhr.data.augment.Augmenter` of each level (light, default,
   strong) called on every line in turn in this process's main thread (one thread; OpenCV's own
   pool is whatever the process may use, so pin the cores with ``taskset``): lines/s, and how
   much wider or narrower the augmented lines are (pixels out / pixels in: the size of the
   images the model then trains on), with each line's CTC floor as training passes it. The
   levels run interleaved, ``--rounds`` timed rounds after one untimed one (it builds each
   thread's pipeline), each round a new epoch number (new draws).
2. **training throughput**: ``tfnhr.models.build_recognizer(charset, None, None, ((2, 2), (2,
   2)), 0.25, "leaky_lp", preset="small", input_height=H)`` compiled with
   ``make_optimizer("adam", 0.005, 10.0)`` (``tfnhr train``'s defaults), trained with
   ``model.fit(dataset.repeat(), steps_per_epoch=--steps, epochs=1)`` (default 24 steps) on
   :func:`tfnhr.data.dataset.make_dataset` batches (``--batch-pixels``, shuffled) with
   ``augment=None`` ("plain") and with ``augment=Augmenter("default", 0, floors)``
   ("augmented"; the floors of ``ctc_min_widths``, as ``tfnhr train`` passes them). One model
   serves both (the step's cost does not depend on the weights); each dataset gets a
   warm-up fit of 2 steps first (tracing, the generator's start), then the two alternate in each
   of ``--rounds`` rounds. Lines per step = lines / the dataset's cardinality (batches per
   epoch); throughput = steps x lines per step / wall seconds of the fit. Both datasets use the
   same seed, so they step through the same batches in the same order.

The data pipeline augments in a pool of ``AUGMENT_THREADS`` (2) threads inside the ``tf.data``
generator, with a prefetch of 2 batches, so augmentation runs ahead of training: with free cores
it is hidden; on one core (``taskset -c 0 ... --threads 1``, as ``make bench`` runs it) it
competes with the training step for the core, which is the cost this shows as the ratio
augmented / plain. Each timed fit starts a fresh iterator, so its first batch is made while
training waits (in both variants). The report gives medians and ranges (min..max) over the
rounds, wall and process CPU seconds.

Usage::

    taskset -c 0 python benchmarks/augment_speed.py --threads 1 --out build/bench/augment_speed.json  # ~3 min
    python benchmarks/augment_speed.py --lines 40 --steps 2 --rounds 1                              # smoke run

Without ``--out`` the JSON goes to stdout after the table (the table then goes to stderr).
"""

from __future__ import annotations

import argparse
import statistics
import sys

import _harness

LEVELS = ("light", "default", "strong")


def make_lines(count: int, seed: int, height: int):
    """``count`` synthetic lines as a ``TextImageSet``, images scaled to ``height`` rows."""
    from tfnhr.data.synthetic import handwriting
    from tfnhr.data.images import scale_to_height
    from tfnhr.data.samples import TextImageSet

    rendered = handwriting.generate(count, seed)
    return TextImageSet(images=[scale_to_height(image, height) for image, _ in rendered],
                        texts=[text for _, text in rendered], ids=[f"synth-{i:05d}" for i in range(count)])


def augmentation_alone(data, floors: list[int], rounds: int, seed: int) -> dict:
    """Lines/s of one thread per level (:data:`LEVELS`), interleaved; and pixel growth.
    ``floors``: each line's narrowest width (px), as training passes them."""
    from tfnhr.data.augment import Augmenter

    pixels_in = int(data.pixels().sum())
    augmenters = {level: Augmenter(level, seed, floors) for level in LEVELS}
    pixels_out = {level: [] for level in LEVELS}
    times = {level: _harness.Times() for level in LEVELS}
    for epoch in range(1 + rounds):  # epoch 0 untimed; every round draws anew, the same for every level
        for level, augment in augmenters.items():
            pixels, wall, cpu = _harness.timed(
                lambda: sum(augment(image, epoch, index).size for index, image in enumerate(data.images)))
            if epoch:
                pixels_out[level].append(pixels)
                times[level].wall.append(wall)
                times[level].cpu.append(cpu)
    result = {}
    for level in LEVELS:
        rates = [len(data) / seconds for seconds in times[level].wall]
        result[level] = {"lines_per_second": _harness.spread(rates, keep_all=True),
                         "seconds": times[level].wall, "cpu_seconds": times[level].cpu,
                         "pixel_growth": statistics.mean(pixels_out[level]) / pixels_in}
    return result


def small_recognizer(charset, height: int):
    """The ``small`` preset on 2x2, 2x2 blocks, compiled as ``tfnhr train`` compiles it."""
    from tfnhr.models import build_recognizer
    from tfnhr.training.loop import make_optimizer

    model = build_recognizer(charset, None, None, ((2, 2), (2, 2)), 0.25, "leaky_lp", preset="small",
                             input_height=height)
    model.compile(optimizer=make_optimizer("adam", 0.005, 10.0))
    return model


def training(data, charset, model, args) -> dict:
    """Lines/s of ``model.fit`` without and with the default augmentation, alternating."""
    from tfnhr.data.augment import Augmenter
    from tfnhr.data.dataset import make_dataset
    from tfnhr.data.samples import ctc_min_widths, drop_infeasible

    data = drop_infeasible(data, charset, model.width_reduction)
    datasets = {"plain": make_dataset(data, charset, args.batch_pixels, shuffle=True, seed=0, augment=None),
                "augmented": make_dataset(data, charset, args.batch_pixels, shuffle=True, seed=0,
                                          augment=Augmenter("default", 0, ctc_min_widths(data, charset,
                                                                                         model.width_reduction)))}
    batches = int(datasets["plain"].cardinality())
    lines_per_step = len(data) / batches
    repeated = {name: dataset.repeat() for name, dataset in datasets.items()}
    for name, dataset in repeated.items():  # warm-up: tracing, the generator's first start
        _harness.log(f"training warm-up ({name}) ...")
        model.fit(dataset, steps_per_epoch=2, epochs=1, shuffle=False, verbose=0)

    def fit(name: str):
        model.fit(repeated[name], steps_per_epoch=args.steps, epochs=1, shuffle=False, verbose=0)

    _harness.log(f"training: {args.rounds} round(s) of {args.steps} steps, plain and augmented ...")
    times = _harness.interleaved({name: (lambda name=name: fit(name)) for name in repeated}, args.rounds)
    rates = {name: [args.steps * lines_per_step / seconds for seconds in measured.wall]
             for name, measured in times.items()}
    ratios = [augmented / plain for augmented, plain in zip(rates["augmented"], rates["plain"])]
    return {"lines": len(data), "batches_per_epoch": batches, "lines_per_step": lines_per_step,
            "steps": args.steps, "batch_pixels": args.batch_pixels, "parameters": model.count_params(),
            "lines_per_second": {name: _harness.spread(values, keep_all=True) for name, values in rates.items()},
            "seconds": {name: measured.wall for name, measured in times.items()},
            "cpu_seconds": {name: measured.cpu for name, measured in times.items()},
            "ratio": statistics.median(rates["augmented"]) / statistics.median(rates["plain"]),
            "ratio_per_round": _harness.spread(ratios, keep_all=True)}


def measure(args: argparse.Namespace) -> dict:
    _harness.set_threads(args.threads)
    from tfnhr.charset import Charset
    from tfnhr.data.samples import ctc_min_widths

    _harness.log(f"rendering {args.lines} lines ...")
    data = make_lines(args.lines, args.seed, args.height)
    charset = Charset.from_texts(data.texts)
    model = small_recognizer(charset, args.height)
    _harness.log("augmentation alone ...")
    alone = augmentation_alone(data, ctc_min_widths(data, charset, model.width_reduction), args.rounds, args.seed)
    trained = training(data, charset, model, args)
    report = {"lines": len(data), "height": args.height, "pixels": int(data.pixels().sum()),
              "threads": args.threads, "rounds": args.rounds, "seed": args.seed,
              "augmentation_alone": alone, "training": trained}
    print_table(report)
    return report


def print_table(report: dict) -> None:
    print(f"{report['lines']} synthetic lines at {report['height']} px ({report['pixels'] / report['lines']:,.0f} "
          f"px/line), {report['threads']} thread(s), median and range of {report['rounds']} round(s)")
    print("\naugmentation alone (one thread)")
    print(f"{'level':<8} {'lines/s':>9} {'range':>17} {'ms/line':>8} {'px out/in':>9}")
    for level, figures in report["augmentation_alone"].items():
        rate = figures["lines_per_second"]
        print(f"{level:<8} {rate['median']:9.1f} {rate['min']:8.1f}..{rate['max']:<8.1f} "
              f"{1000 / rate['median']:8.2f} {figures['pixel_growth']:9.3f}")
    trained = report["training"]
    print(f"\ntraining, small recognizer, 2x2 blocks ({trained['parameters']:,} parameters), "
          f"{trained['steps']} steps of {trained['lines_per_step']:.1f} lines ({trained['batch_pixels']:,} px budget)")
    print(f"{'data':<10} {'lines/s':>9} {'range':>17}")
    for name, rate in trained["lines_per_second"].items():
        print(f"{name:<10} {rate['median']:9.2f} {rate['min']:8.2f}..{rate['max']:<8.2f}")
    ratio = trained["ratio_per_round"]
    print(f"augmented / plain: {trained['ratio']:.3f} (per round {ratio['min']:.3f}..{ratio['max']:.3f})")


def main(argv=None) -> int:
    parser = _harness.parser(__doc__, rounds=3)
    parser.add_argument("--lines", type=int, default=300, help="synthetic lines (default 300)")
    parser.add_argument("--height", type=int, default=32, help="line height in px (default 32)")
    parser.add_argument("--batch-pixels", type=int, default=150_000, help="pixel budget of a batch (default 150000)")
    parser.add_argument("--steps", type=int, default=24, help="training steps per timed fit (default 24)")
    parser.add_argument("--seed", type=int, default=0, help="synthetic set and augmenter seed (default 0)")
    return _harness.main(measure, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
