"""The main job (``make demo``): train the ``small`` recognizer on the embedded synthetic
handwriting set on CPU and report validation CER/WER on held-out fonts, greedy and with an LM.

Steps, all under ``--out`` (default ``runs/main``):

1. ``synth/``: synthetic lines in the IAM layout (training fonts for train, held-out fonts for
   validation and test; :mod:`tfnhr.data.synthetic`).
2. ``lm.arpa``: a word 3-gram LM (modified Kneser-Ney) of the synthetic corpus's training text.
3. ``model/``: :func:`tfnhr.training.train` (CTC, Adam 0.005, clipping 10, LR halving on
   validation CER/WER), stopped by a time limit; ``model/best.keras`` is the best epoch.
4. Validation and test CER/WER of the best model: greedy and beam search + LM; ``main.json``.

``--preset quick`` (default) fits in 20 minutes on 2 cores; ``--preset full`` trains an hour on
more data for lower error rates (docs/performance.md, "Main job", has the measured ones).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path

from tfnhr.data import synthetic
from tfnhr.data.sources import load_data_subset
from tfnhr.decoding import make_decoder
from tfnhr.evaluation import evaluate_set, format_table
from tfnhr.lm import build_arpa
from tfnhr.models import CtcModel, load_recognizer
from tfnhr.training import TrainOptions, train

PRESETS: dict[str, dict] = {
    "quick": {"train": 3000, "val": 200, "test": 200, "time_limit": 14.0, "epochs": 80},
    "full": {"train": 10000, "val": 400, "test": 400, "time_limit": 60.0, "epochs": 80},
}
"""Data sizes (lines) and training limits (minutes, epochs) of the two main-job presets."""

IMAGE_HEIGHT = 32
"""Lines are scaled to this height (px): characters are then ~9 px wide, i.e. ~2.3 output
columns per character with the two 2x2 block convolutions."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="quick")
    parser.add_argument("--out", type=Path, default=Path("runs/main"))
    parser.add_argument("--time-limit", type=float, default=None,
                        help="training minutes (default: the preset's)")
    for subset in ("train", "val", "test"):
        parser.add_argument(f"--{subset}", type=int, default=None,
                            help=f"{subset} lines (default: the preset's)")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    preset = {**PRESETS[args.preset],
              **{key: getattr(args, key) for key in ("train", "val", "test") if getattr(args, key) is not None}}
    started = time.monotonic()

    data = args.out / "synth"
    print(f"[1/4] synthetic lines: {preset['train']} train, {preset['val']} val, {preset['test']} test -> {data}",
          flush=True)
    synthetic.write_iam_layout(data, {"train": preset["train"], "val": preset["val"], "test": preset["test"]},
                               kind="lines", seed=args.seed)
    print(f"[2/4] word 3-gram LM of the training text -> {args.out / 'lm.arpa'}", flush=True)
    lm_stats = build_arpa(synthetic.corpus_text("train").splitlines(), order=3, out_path=args.out / "lm.arpa")
    time_limit = args.time_limit if args.time_limit is not None else preset["time_limit"]
    print(f"[3/4] training the small recognizer (time limit {time_limit} min)", flush=True)
    summary = train(TrainOptions(
        data=data, out=args.out / "model", preset="small", block=((2, 2), (2, 2)), height=IMAGE_HEIGHT,
        batch_pixels=150_000, epochs=preset["epochs"], time_limit=time_limit, seed=args.seed))
    print("[4/4] evaluating the best model on held-out fonts", flush=True)
    results = {"preset": args.preset, "training": summary, "lm": {k: lm_stats[k] for k in ("vocabulary", "ngrams")}}
    model = load_recognizer(args.out / "model" / "best.keras")
    for subset in ("val", "test"):
        results[subset] = evaluate_subset(model, data, subset, args.out / "lm.arpa", args.out / "model" / f"{subset}.json")
    results["minutes"] = round((time.monotonic() - started) / 60, 1)
    (args.out / "main.json").write_text(json.dumps(results, indent=1) + "\n")
    print(f"\nmodel saved at {args.out / 'model' / 'best.keras'}; results in {args.out / 'main.json'}; "
          f"{results['minutes']} min in all")
    return 0


def evaluate_subset(model: CtcModel, data: Path, subset: str, lm_path: Path, out: Path) -> list[dict]:
    """Print and return the greedy and beam+LM CER/WER of the model on ``subset`` (the table
    ``tfnhr evaluate`` prints); the JSON table is kept in ``out``."""
    decoders = {name: make_decoder(name, model.charset, lm=lm_path) for name in ("greedy", "beam+lm")}
    examples = load_data_subset(data, subset)
    rows, _ = evaluate_set(model, examples, decoders)
    print(f"{subset}: {len(examples)} lines of {data}")
    print(format_table(rows))
    table = [row.__dict__ for row in rows]
    out.write_text(json.dumps(table, indent=1) + "\n")
    return table


if __name__ == "__main__":
    raise SystemExit(main())
