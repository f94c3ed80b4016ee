"""``tfnhr train``: train a recognizer on a data set in IAM layout (IAM itself or ``tfnhr synth``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def size_pair(text: str) -> tuple[int, int]:
    """``"2x4"`` -> ``(2, 4)`` (block height x width, pixels)."""
    try:
        height, width = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HxW such as 2x4, got {text!r}") from None
    if height < 1 or width < 1:
        raise argparse.ArgumentTypeError(f"block sizes must be positive, got {text!r}")
    return height, width


def int_list(text: str) -> tuple[int, ...]:
    """``"2,10,50"`` -> ``(2, 10, 50)``."""
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """Options that select data in IAM layout (shared by train and evaluate)."""
    parser.add_argument("--data", type=Path, required=True,
                        help="folder in IAM layout (ascii/, lines/ or words/, split files)")
    parser.add_argument("--kind", choices=("lines", "words"), default="lines", help="line or word images")
    parser.add_argument("--split", default="official",
                        help="'official' (largeWriterIndependentTextLineRecognitionTask/) or a folder "
                             "with train/valid/test id lists (e.g. the seed's 6161/966/2915 split)")
    parser.add_argument("--keep-err", action="store_true", help="keep rows whose IAM segmentation is 'err'")


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``train`` to the ``tfnhr`` sub-commands."""
    parser = commands.add_parser(
        "train", help="train a recognizer (CTC, Adam, LR halving on validation CER/WER)",
        description="Train an MDLSTM recognizer with CTC. Writes best.keras, last.keras, log.csv, "
                    "tensorboard/ and summary.json into --out.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_train_arguments(parser)
    parser.set_defaults(run=run)


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``tfnhr train`` (data, model, training; read by :func:`options_from_args`),
    also offered by ``horovod_jobs/train.py --task nhr``."""
    from tfnhr.training import TrainOptions

    defaults = TrainOptions(data=Path("."))
    add_data_arguments(parser)
    parser.add_argument("--out", type=Path, default=defaults.out, help="output folder")
    parser.add_argument("--preset", choices=("small", "large"), default=defaults.preset,
                        help="model size: small = MDLSTM (2, 10, 50), large = (4, 20, 100)")
    parser.add_argument("--units", type=int_list, default=None, help="MDLSTM units per level (overrides --preset)")
    parser.add_argument("--filters", type=int_list, default=None, help="block-conv filters (overrides --preset)")
    parser.add_argument("--block", type=size_pair, nargs="+", default=[(2, 4)],
                        help="block-conv kernel=stride HxW: one for both convolutions, or one each")
    parser.add_argument("--dropout", type=float, default=defaults.dropout, help="dropout on MDLSTM outputs")
    parser.add_argument("--cell", choices=("leaky_lp", "leaky_lp_new_state", "lstm"), default=defaults.cell,
                        help="MDLSTM cell")
    parser.add_argument("--height", type=int, default=None, help="scale images to this height (px)")
    parser.add_argument("--batch-pixels", type=int, default=defaults.batch_pixels,
                        help="pixel budget of one batch (after scaling)")
    parser.add_argument("--epochs", type=int, default=defaults.epochs, help="maximum epochs")
    parser.add_argument("--lr", type=float, default=defaults.learning_rate, help="Adam learning rate")
    parser.add_argument("--clipnorm", type=float, default=defaults.clipnorm, help="gradient-norm clipping")
    parser.add_argument("--halve-on", choices=("either", "both", "cer", "wer"), default=defaults.trigger,
                        help="halve the LR (reset Adam, restore the best weights) when the validation "
                             "CER/WER get worse than the best epoch's: either of them, both, or one")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="weights and shuffling seed")
    parser.add_argument("--max-train", type=int, default=None, help="use only the first N training samples")
    parser.add_argument("--max-val", type=int, default=None, help="use only the first N validation samples")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="minutes; stop at the end of the epoch that passes it")
    parser.add_argument("--resume", action="store_true", help="continue from --out's last.keras/state.json")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def options_from_args(args: argparse.Namespace):
    """The :class:`~tfnhr.training.TrainOptions` of parsed ``tfnhr train`` arguments."""
    from tfnhr.training import TrainOptions

    if len(args.block) > 2:
        raise ValueError(f"--block takes one or two HxW sizes, got {len(args.block)}")
    return TrainOptions(
        data=args.data, out=args.out, kind=args.kind, split=args.split, keep_err=args.keep_err,
        preset=args.preset, mdlstm_units=args.units, conv_filters=args.filters,
        block=tuple(args.block) * (2 if len(args.block) == 1 else 1), dropout=args.dropout, cell=args.cell,
        height=args.height, batch_pixels=args.batch_pixels, epochs=args.epochs, learning_rate=args.lr,
        clipnorm=args.clipnorm, trigger=args.halve_on, seed=args.seed, max_train=args.max_train,
        max_val=args.max_val, time_limit=args.time_limit, resume=args.resume, verbose=0 if args.quiet else 1)


def run(args: argparse.Namespace) -> int:
    """Train; returns the exit status (2 with a one-line reason for bad data or options)."""
    from tfnhr.training import train

    try:
        train(options_from_args(args))
    except (FileNotFoundError, ValueError) as error:
        print(f"tfnhr train: error: {error}", file=sys.stderr)
        return 2
    return 0
