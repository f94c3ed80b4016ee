"""``tfnhr evaluate``: CER/WER of a trained recognizer on a subset of a data set in IAM layout,
greedy decoding against beam search with a word n-gram LM."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tfnhr.config.choices import DECODERS, SUBSETS, example_noun
from tfnhr.commands.common import add_decoder_arguments, add_decoding_processes, decoder_from_args, reports_errors
from tfnhr.config.options import DefaultsHelpFormatter
from tfnhr.config.train_options import add_data_arguments
from tfnhr.config.ranges import COUNT, NONNEGATIVE_COUNT


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``evaluate`` to the ``tfnhr`` sub-commands."""
    parser = commands.add_parser(
        "evaluate", help="CER/WER of a trained model (greedy vs beam vs beam+LM)",
        description=" ".join(__doc__.split()), formatter_class=DefaultsHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a saved model (best.keras)")
    add_data_arguments(parser)
    parser.add_argument("--subset", choices=SUBSETS, default="test", help="which subset")
    parser.add_argument("--max", type=COUNT.type, default=None, help="evaluate only the first N samples")
    add_decoder_arguments(parser)
    add_decoding_processes(parser)
    parser.add_argument("--decoders", nargs="+", choices=DECODERS, default=None,
                        help="decoders to compare; none given: greedy, and beam+lm with --lm")
    parser.add_argument("--show", type=NONNEGATIVE_COUNT.type, default=0, help="print the first N references and hypotheses")
    parser.add_argument("--json", type=Path, default=None, help="also write the table as JSON here")
    parser.set_defaults(run=run)


@reports_errors("evaluate")
def run(args: argparse.Namespace) -> int:
    """Evaluate and print the table; returns the exit status."""
    from tfnhr.data.sources import load_data_subset
    from tfnhr.evaluation.tables import evaluate_set, format_table
    from tfnhr.models import load_recognizer

    model = load_recognizer(args.model)
    data = load_data_subset(args.data, args.subset, kind=args.kind, split=args.split,
                            keep_err=args.keep_err, limit=args.max)
    names = args.decoders or (["greedy", "beam+lm"] if args.lm else ["greedy"])
    decoders = {name: decoder_from_args(name, args, model.charset) for name in names}
    rows, transcriptions = evaluate_set(model, data, decoders, widths=args.widths, shears=args.shears)
    print(f"{args.model} on {len(data)} {args.subset} {example_noun(args.kind)} of {args.data}")
    print(format_table(rows))
    for reference, *hypotheses in list(zip(data.texts, *transcriptions.values()))[:args.show]:
        print(f"\n  reference: {reference}")
        for name, hypothesis in zip(transcriptions, hypotheses):
            print(f"  {name:>9}: {hypothesis}")
    if args.json:
        args.json.write_text(json.dumps([row.__dict__ for row in rows], indent=1) + "\n")
    return 0
