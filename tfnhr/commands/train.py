"""``tfnhr train``: train a recognizer on a data set in IAM layout (IAM itself or ``tfnhr synth``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from tfnhr.choices import (AUGMENT_LEVELS, CELLS, DEFAULT_MODEL_PRESET, HALVE_ON, MODEL_PRESETS, OPTIMIZERS,
                           describe_presets, shipped_configs)
from tfnhr.commands.common import DefaultsHelpFormatter, USER_ERRORS, add_data_arguments, reports_errors, size_pair
from tfnhr.ranges import COUNT, TRAIN, each


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``train`` to the ``tfnhr`` sub-commands."""
    parser = commands.add_parser(
        "train", help="train a recognizer (CTC, Adam, LR halving on validation CER/WER)",
        description="Train an MDLSTM recognizer with CTC. Writes best.keras, last.keras, log.csv, "
                    "tensorboard/ and summary.json into --out.",
        formatter_class=DefaultsHelpFormatter)
    add_train_arguments(parser)
    parser.add_argument("--workers", type=COUNT.type, default=1,
                        help="training processes on this machine: N > 1 runs N single-threaded Horovod workers "
                             "(horovodrun, Gloo) that average their gradients every step; one per core is "
                             "fastest on CPU (docs/performance.md)")
    parser.set_defaults(run=run)


FLAG_FIELDS = {"preset": "preset", "units": "mdlstm_units", "filters": "conv_filters", "block": "block",
               "dropout": "dropout", "cell": "cell", "height": "height", "batch_pixels": "batch_pixels",
               "epochs": "epochs", "lr": "learning_rate", "optimizer": "optimizer", "clipnorm": "clipnorm",
               "halve_on": "halve_on", "halve_start": "halve_start", "halve_patience": "halve_patience",
               "halve_margin": "halve_margin", "seed": "seed", "augment": "augment",
               "validate_every": "validate_every", "anneal": "anneal", "sort_window": "sort_window", "ema": "ema",
               "confidence_penalty": "confidence_penalty", "normalize_spacing": "normalize_spacing"}
"""Options whose flags are only set when given (so a config file can supply them) -> the
:class:`~tfnhr.training.TrainOptions` field."""

# The documented defaults of the options in FLAG_FIELDS (help texts only; the values that apply come
# from tfnhr.training.TrainOptions, which a test keeps equal to these).
HELP_DEFAULTS = {"out": Path("runs/recognizer"), "preset": DEFAULT_MODEL_PRESET, "dropout": 0.25,
                 "cell": "leaky_lp", "batch_pixels": None, "epochs": 80, "learning_rate": 0.005, "optimizer": "adam",
                 "clipnorm": 10.0, "seed": 0, "halve_start": 0.5, "halve_patience": 2, "halve_margin": 1.0,
                 "augment": "default", "anneal": 0.5, "sort_window": 1, "ema": 0.99,
                 "confidence_penalty": 0.1, "normalize_spacing": False}


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``tfnhr train`` (data, model, training; read by :func:`options_from_args`),
    also offered by ``horovod_jobs/train.py --task nhr``. The options in :data:`FLAG_FIELDS`
    stay unset unless given: their defaults come from ``--config`` or :class:`~tfnhr.training.TrainOptions`."""
    defaults = argparse.Namespace(**HELP_DEFAULTS)
    unset = argparse.SUPPRESS
    add_data_arguments(parser)
    parser.add_argument("--out", type=Path, default=defaults.out, help="output folder")
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="a JSON/YAML file describing the network and training parameters, or a shipped "
                             f"config ({', '.join(shipped_configs())}); flags given here override its "
                             "training parameters")
    parser.add_argument("--preset", choices=MODEL_PRESETS, default=unset,
                        help=f"model size, MDLSTM units / block-conv filters: {describe_presets()} "
                             f"(default {defaults.preset})")
    parser.add_argument("--units", type=each(COUNT), default=unset,
                        help="MDLSTM units per level (overrides --preset; one more level than block convolutions "
                             "drops a stem preset's stem)")
    parser.add_argument("--filters", type=each(COUNT), default=unset, help="block-conv filters (overrides --preset)")
    parser.add_argument("--block", type=size_pair, nargs="+", default=unset,
                        help="block-conv kernel=stride HxW: one for both convolutions, or one each (default 2x4)")
    parser.add_argument("--dropout", type=TRAIN["dropout"].type, default=unset,
                        help=f"dropout on MDLSTM outputs (default {defaults.dropout})")
    parser.add_argument("--cell", choices=CELLS, default=unset,
                        help=f"MDLSTM cell (default {defaults.cell})")
    parser.add_argument("--height", type=TRAIN["height"].type, default=unset, help="scale images to this height (px; default: keep)")
    parser.add_argument("--batch-pixels", type=TRAIN["batch_pixels"].type, default=unset,
                        help="pixel budget of one batch, after scaling (default: 12 training examples of median size, "
                             "at least 2 of the largest)")
    parser.add_argument("--epochs", type=TRAIN["epochs"].type, default=unset, help=f"maximum epochs (default {defaults.epochs})")
    parser.add_argument("--lr", type=TRAIN["learning_rate"].type, default=unset, help=f"learning rate (default {defaults.learning_rate})")
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default=unset, help=f"optimizer (default {defaults.optimizer})")
    parser.add_argument("--clipnorm", type=TRAIN["clipnorm"].type, default=unset,
                        help=f"gradient global-norm clipping (default {defaults.clipnorm})")
    parser.add_argument("--halve-on", choices=HALVE_ON, default=unset,
                        help="halve the LR (reset the optimizer, restore the best weights) when the validation "
                             "CER/WER get worse than the best epoch's: either of them (default), both, one, "
                             "or never (constant LR)")
    parser.add_argument("--halve-start", type=TRAIN["halve_start"].type, default=unset,
                        help="halving starts once the validation CER is below this fraction of the first "
                             "validation's (the model has left CTC's blank phase); 'none': from the start "
                             f"(default {defaults.halve_start})")
    parser.add_argument("--halve-patience", type=TRAIN["halve_patience"].type, default=unset,
                        help=f"worse validations in a row before halving, at least one epoch's worth (default {defaults.halve_patience})")
    parser.add_argument("--halve-margin", type=TRAIN["halve_margin"].type, default=unset, metavar="STANDARD_ERRORS",
                        help="a validation counts as worse only when its CER/WER exceeds the best's by more than "
                             "this many binomial standard errors over the validation set's characters/words; "
                             f"0: any increase (default {defaults.halve_margin})")
    parser.add_argument("--augment", choices=AUGMENT_LEVELS, default=unset,
                        help=f"training-time image augmentation level (default {defaults.augment})")
    parser.add_argument("--anneal", type=TRAIN["anneal"].type, default=unset, metavar="FRACTION",
                        help="with --time-limit: lower the learning rate linearly to 1/20 from this fraction of "
                             f"the limit on; 'none': keep it (default {defaults.anneal})")
    parser.add_argument("--sort-window", type=TRAIN["sort_window"].type, default=unset, metavar="BATCHES",
                        help="batch lines of similar widths, sorted within windows of this many batches: less "
                             "padding and faster steps, but one main-job run with 8 learned worse (docs/performance.md); "
                             f"1: random batches (default {defaults.sort_window})")
    parser.add_argument("--ema", type=TRAIN["ema"].type, default=unset, metavar="MOMENTUM",
                        help="validate, checkpoint and keep a moving average of the weights over the updates "
                             "(0.99: about the last 100); 'none': the last update's weights "
                             f"(default {defaults.ema})")
    parser.add_argument("--confidence-penalty", type=TRAIN["confidence_penalty"].type, default=unset, metavar="WEIGHT",
                        help="subtract WEIGHT times the entropy of the output columns from each line's CTC loss, so "
                             "that the model is less sure of its readings (unseen handwritten digits read better: "
                             f"docs/performance.md); 0: CTC alone (default {defaults.confidence_penalty:g})")
    parser.add_argument("--normalize-spacing", action=argparse.BooleanOptionalAction, default=unset,
                        help="scale every line's width so that its vertical strokes lie the training lines' median "
                             "distance apart, in training and when the model reads (docs/recognizer.md) "
                             f"(default {'on' if defaults.normalize_spacing else 'off'})")
    parser.add_argument("--validate-every", type=TRAIN["validate_every"].type, default=unset, metavar="UPDATES",
                        help="validate (log, checkpoint, maybe halve) every N updates instead of every epoch")
    parser.add_argument("--seed", type=TRAIN["seed"].type, default=unset, help=f"weights and shuffling seed (default {defaults.seed})")
    parser.add_argument("--threads", type=TRAIN["threads"].type, default=None,
                        help="TensorFlow threads of this process (default: every core it may use; under Horovod "
                             "each worker's share, cores / workers on the host; also written none); 0: TensorFlow's default")
    parser.add_argument("--mixed-precision", action="store_true",
                        help="compute in float16 on a GPU, bfloat16 on a CPU (variables, the MDLSTM recurrence and "
                             "CTC stay float32)")
    parser.add_argument("--max-train", type=TRAIN["max_train"].type, default=None, help="use only the first N training samples")
    parser.add_argument("--max-val", type=TRAIN["max_val"].type, default=None, help="use only the first N validation samples")
    parser.add_argument("--time-limit", type=TRAIN["time_limit"].type, default=None,
                        help="minutes; stop at the end of the epoch that passes it")
    parser.add_argument("--resume", action="store_true", help="continue from --out's last.keras/state.json")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the run already in --out (without --resume or this, such a folder is refused)")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def options_from_args(args: argparse.Namespace):
    """The :class:`~tfnhr.training.TrainOptions` of parsed ``tfnhr train`` arguments: defaults,
    then the ``--config`` file's settings, then the flags given
    (:func:`~tfnhr.training.resolve_options`). ``ValueError`` for a bad config file or model flags
    combined with ``--config``."""
    from tfnhr.network import load_config
    from tfnhr.training import resolve_options

    given = {FLAG_FIELDS[flag]: value for flag, value in vars(args).items() if flag in FLAG_FIELDS}
    if "block" in given:
        if len(given["block"]) > 2:
            raise ValueError(f"--block takes one or two HxW sizes, got {len(given['block'])}")
        given["block"] = tuple(given["block"]) * (2 if len(given["block"]) == 1 else 1)
    run = {"data": args.data, "out": args.out, "kind": args.kind, "split": args.split, "keep_err": args.keep_err,
           "max_train": args.max_train, "max_val": args.max_val, "time_limit": args.time_limit,
           "resume": args.resume, "overwrite": args.overwrite, "verbose": 0 if args.quiet else 1, "threads": args.threads,
           "mixed_precision": args.mixed_precision}
    config = load_config(args.config) if args.config is not None else None
    flags = {field: "--" + flag.replace("_", "-") for flag, field in FLAG_FIELDS.items()}
    return resolve_options(run, config, given, names=flags)


WORKER_DROPPED = {"--workers": True, "--verbose": False}
"""``tfnhr train`` options that its Horovod workers do not take -> whether the option has a value."""


def worker_arguments(argv: Sequence[str]) -> list[str]:
    """The arguments of a ``tfnhr train`` command line (``argv`` after ``tfnhr``) that its
    Horovod workers get (``horovod_jobs.train --task nhr``): the options after ``train`` without
    those of :data:`WORKER_DROPPED` (also when abbreviated or written ``--option=value``)."""
    tokens = list(argv)
    tokens = tokens[tokens.index("train") + 1:]
    kept, skip_value = [], False
    for token in tokens:
        if skip_value:
            skip_value = False
            continue
        name = token.split("=", 1)[0]
        dropped = [option for option in WORKER_DROPPED if len(name) >= 3 and option.startswith(name)]
        if token.startswith("--") and dropped:
            skip_value = WORKER_DROPPED[dropped[0]] and "=" not in token
            continue
        kept.append(token)
    return kept


def check_data_listing(data: Path, kind: str, split: str, keep_err: bool) -> None:
    """Fail here, in one line, on what every worker would fail on at once: ``data`` missing, or an
    IAM-layout folder whose training or validation list is unreadable or empty (reads the text
    files only, no images; HDF5 files and pages folders are checked by the workers)."""
    from tfnhr.data.sources import folder_kind, folder_samples, is_hdf5

    if not Path(data).exists():
        raise FileNotFoundError(f"{data} does not exist")
    if not is_hdf5(data) and folder_kind(data, kind) != "pages":
        for subset in ("train", "val"):
            folder_samples(data, subset, kind, split, keep_err)


@reports_errors("train", (*USER_ERRORS, RuntimeError))
def run(args: argparse.Namespace) -> int:
    """Train, in this process or (``--workers N``) as N Horovod workers; returns the exit status (2
    with a one-line reason for bad data or options)."""
    options = options_from_args(args)  # checks every option here, before workers start
    if args.workers > 1:
        from tfnhr.training.workers import run_local_workers

        check_data_listing(options.data, options.kind, options.split, options.keep_err)
        run_local_workers(worker_arguments(args.argv), args.workers)
        return 0
    from tfnhr.training import train

    train(options)
    return 0
