"""Fashion-MNIST test accuracy of MLCN vs CapsNet for the same training time, in one run.

Each model trains on the real Fashion-MNIST (60k/10k, local IDX files: ``apt-get install
dataset-fashion-mnist``) with Adam (lr 1e-3, × 0.9 per epoch, batch 100, as the public CapsNet
code) for ``--minutes`` of training wall time; the full test set is scored after every epoch and
when the budget ends (scoring time is not counted). Rosario et al. 2019, Table I, report
92.63 % (MLCN, 8 lanes × width 4) and 91.30 % (CapsNet, Sabour et al. 2017) after full training
on GPUs.

    python benchmarks/fashion_mnist_accuracy.py --minutes 12 --out build/bench/fashion_mnist_accuracy.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import _harness

from capsnet.environment import prefer_onednn

ONEDNN = prefer_onednn()  # before keras imports TensorFlow

import keras  # noqa: E402

MODELS = {"mlcn_2x4": ["4x1"] * 2, "mlcn_8x4": ["4x1"] * 8, "capsnet": None}


class TrainingBudget(keras.callbacks.Callback):
    """Stop ``fit`` after the batch that brings the total training time over ``seconds``."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds, self.spent, self.steps = seconds, 0.0, 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch_started = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if self.spent + time.perf_counter() - self.epoch_started > self.seconds:
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        self.spent += time.perf_counter() - self.epoch_started

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.seconds


def train_for_budget(model, data, batch: int, seconds: float, seed: int) -> dict:
    """Train until ``seconds`` of training time are spent; score the test set after every epoch."""
    from capsnet.data import to_dataset

    steps_per_epoch = -(-len(data.x_train) // batch)
    schedule = keras.optimizers.schedules.ExponentialDecay(1e-3, steps_per_epoch, 0.9, staircase=True)
    model.compile(optimizer=keras.optimizers.Adam(schedule))
    budget, curve, epoch = TrainingBudget(seconds), [], 0
    test = to_dataset(data.x_test, data.y_test, 500)
    while not budget.exhausted:
        train = to_dataset(data.x_train, data.y_train, batch, shuffle=True, seed=seed + epoch)
        model.fit(train, epochs=1, verbose=2, callbacks=[budget], shuffle=False)  # to_dataset shuffles
        epoch += 1
        scores = model.evaluate(test, verbose=0, return_dict=True)
        curve.append({"epochs": round(budget.steps / steps_per_epoch, 3), "train_seconds": round(budget.spent, 1),
                      "test_accuracy": scores["accuracy"], "test_loss": scores["loss"]})
        print(f"  {curve[-1]}", flush=True)
    return {"params": model.count_params(), "steps": budget.steps,
            "seconds_per_step": budget.spent / max(budget.steps, 1), "curve": curve,
            "test_accuracy": curve[-1]["test_accuracy"], "best_test_accuracy": max(c["test_accuracy"] for c in curve)}


def measure(args: argparse.Namespace) -> dict:
    _harness.set_threads(args.threads)
    from capsnet.data import load_dataset
    from capsnet.models import build_capsnet, build_mlcn

    data = load_dataset("fashion_mnist", args.data_dir, args.limit_train, args.limit_test)
    results = {}
    for name in args.models.split(","):
        keras.utils.set_random_seed(args.seed)
        lanes = MODELS[name]
        model = (build_capsnet(data.image_shape, data.num_classes) if lanes is None
                 else build_mlcn(data.image_shape, data.num_classes, lanes))
        print(f"{name}: training for {args.minutes:g} min", flush=True)
        results[name] = train_for_budget(model, data, args.batch, 60 * args.minutes, args.seed)
        print(f"{name}: {results[name]['test_accuracy']:.2%} test accuracy after {results[name]['steps']} steps "
              f"({results[name]['seconds_per_step']:.3f} s/step)", flush=True)
    if "capsnet" in results:
        for name, figures in results.items():
            figures["accuracy_minus_capsnet"] = figures["test_accuracy"] - results["capsnet"]["test_accuracy"]
            figures["steps_ratio_vs_capsnet"] = figures["steps"] / max(results["capsnet"]["steps"], 1)
    print(json.dumps({k: {"test_accuracy": v["test_accuracy"], "steps": v["steps"]} for k, v in results.items()}))
    return {"onednn": ONEDNN, "minutes_per_model": args.minutes, "batch": args.batch,
            "train_examples": len(data.x_train), "test_examples": len(data.x_test), "models": results}


def main(argv=None) -> int:
    parser = _harness.parser(__doc__, threads=0, threads_help="TensorFlow intra- and inter-op threads (0: all cores)")
    parser.add_argument("--minutes", type=float, default=12.0, help="training wall time per model")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated subset of {list(MODELS)}")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--limit-train", type=int, help="first N training images only (smoke runs)")
    parser.add_argument("--limit-test", type=int, help="first N test images only (smoke runs)")
    parser.add_argument("--data-dir", help="folder with the four Fashion-MNIST IDX files")
    parser.add_argument("--seed", type=int, default=0)
    return _harness.main(measure, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
