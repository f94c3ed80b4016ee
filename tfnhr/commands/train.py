"""``tfnhr train``: train a recognizer on a data set in IAM layout (IAM itself or ``tfnhr synth``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from tfnhr.commands.common import USER_ERRORS, reports_errors
from tfnhr.config.options import DefaultsHelpFormatter
from tfnhr.config.ranges import COUNT
from tfnhr.config.train_options import add_train_arguments


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
                             "fastest on CPU (docs/results.md)")
    parser.set_defaults(run=run)


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
    from tfnhr.training import options_from_args

    options = options_from_args(args)  # checks every option here, before workers start
    if args.workers > 1:
        from tfnhr.training.workers import run_local_workers

        check_data_listing(options.data, options.kind, options.split, options.keep_err)
        run_local_workers(worker_arguments(args.argv), args.workers)
        return 0
    from tfnhr.training import train

    train(options)
    return 0
