"""``tfnhr dump``: write the outputs of chosen layers of a trained recognizer for a data subset
into an HDF5 file (layout in :mod:`tfnhr.recognition.dumps`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tfnhr.config.choices import DEFAULT_BATCH_PIXELS, SUBSETS
from tfnhr.commands.common import reports_errors
from tfnhr.config.options import DefaultsHelpFormatter
from tfnhr.config.train_options import add_data_arguments
from tfnhr.config.ranges import COUNT


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``dump`` to the ``tfnhr`` sub-commands."""
    parser = commands.add_parser(
        "dump", help="write layer activations of a trained model to HDF5",
        description="Run a trained recognizer on a data subset and write the outputs of the chosen "
                    "layers (float32, per example, with its id and transcription) into an HDF5 file.",
        formatter_class=DefaultsHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a saved model (best.keras)")
    parser.add_argument("--layer", action="append", required=True,
                        help="a layer to dump (repeat for several); unknown names list the model's layers")
    add_data_arguments(parser)
    parser.add_argument("--subset", choices=SUBSETS, default="val", help="which subset")
    parser.add_argument("--max", type=COUNT.type, default=None, help="dump only the first N samples")
    parser.add_argument("--batch-pixels", type=COUNT.type, default=DEFAULT_BATCH_PIXELS, help="pixel budget of one batch")
    parser.add_argument("--out", type=Path, required=True, help="HDF5 file to write")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=run)


@reports_errors("dump")
def run(args: argparse.Namespace) -> int:
    """Dump and print a summary line; exit status 2 with one line for bad input or layer names."""
    from tfnhr.recognition.dumps import dump_activations
    from tfnhr.data.sources import load_data_subset
    from tfnhr.models import load_recognizer

    layers = list(dict.fromkeys(args.layer))
    model = load_recognizer(args.model)
    data = load_data_subset(args.data, args.subset, kind=args.kind, split=args.split,
                            keep_err=args.keep_err, limit=args.max, progress=not args.quiet)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    written = dump_activations(model, data, layers, args.out, args.batch_pixels, progress=not args.quiet,
                               attrs={"model": str(args.model), "data": str(args.data), "subset": args.subset})
    sizes = ", ".join(f"{name} {figures['values']:,} x {figures['channels']}" for name, figures in written.items())
    print(f"wrote {args.out}: {len(data)} {args.subset} examples; {sizes} values")
    return 0
