"""``tfnhr evaluate``: CER/WER of a trained recognizer on a subset of a data set in IAM layout,
greedy decoding against beam search with a word n-gram LM."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_decoder_arguments(parser: argparse.ArgumentParser) -> None:
    """Beam-search/LM options (shared by evaluate and recognize)."""
    parser.add_argument("--lm", type=Path, default=None, help="ARPA word n-gram model (tfnhr lm build)")
    parser.add_argument("--beam-width", type=int, default=25, help="hypotheses kept per column")
    parser.add_argument("--alpha", type=float, default=0.5, help="LM weight")
    parser.add_argument("--beta", type=float, default=1.0, help="word insertion bonus")
    parser.add_argument("--closed-vocabulary", action="store_true",
                        help="only words of the LM's vocabulary may be output")


DECODERS = ("greedy", "beam", "beam+lm")


def add_decoder_choice(parser: argparse.ArgumentParser) -> None:
    """``--decoder`` (one of :data:`DECODERS`; default beam+lm with ``--lm``, else greedy) and
    the beam/LM options (shared by recognize and serve)."""
    add_decoder_arguments(parser)
    parser.add_argument("--decoder", choices=DECODERS, default=None,
                        help="default: beam+lm with --lm, else greedy")


def make_decoder(name: str, args: argparse.Namespace, charset):
    """The decoder ``name`` (one of :data:`DECODERS`) configured by the beam/LM arguments."""
    from tfnhr.decoding import CtcDecoder, greedy_decode_batch

    if name == "greedy":
        return lambda scores: greedy_decode_batch(scores, charset)
    if name == "beam":
        return CtcDecoder(charset, beam_width=args.beam_width).decode_batch
    if args.lm is None:
        raise ValueError("the beam+lm decoder needs --lm (an ARPA file from tfnhr lm build)")
    return CtcDecoder(charset, beam_width=args.beam_width, lm_path=args.lm, alpha=args.alpha,
                      beta=args.beta, closed_vocabulary=args.closed_vocabulary).decode_batch


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``evaluate`` to the ``tfnhr`` sub-commands."""
    from tfnhr.commands.train import add_data_arguments

    parser = commands.add_parser(
        "evaluate", help="CER/WER of a trained model (greedy vs beam vs beam+LM)",
        description=" ".join(__doc__.split()), formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a saved model (best.keras)")
    add_data_arguments(parser)
    parser.add_argument("--subset", choices=("train", "val", "test"), default="test", help="which subset")
    parser.add_argument("--max", type=int, default=None, help="evaluate only the first N samples")
    add_decoder_arguments(parser)
    parser.add_argument("--decoders", nargs="+", choices=DECODERS, default=None,
                        help="decoders to compare; none given: greedy, and beam+lm with --lm")
    parser.add_argument("--show", type=int, default=0, help="print the first N references and hypotheses")
    parser.add_argument("--json", type=Path, default=None, help="also write the table as JSON here")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Evaluate and print the table; returns the exit status."""
    from tfnhr.data.sources import load_data_subset
    from tfnhr.evaluation import column_scores, evaluate, format_table
    from tfnhr.model import load_recognizer

    try:
        model = load_recognizer(args.model)
        data = load_data_subset(args.data, args.subset, kind=args.kind, split=args.split,
                                keep_err=args.keep_err, limit=args.max)
        names = args.decoders or (["greedy", "beam+lm"] if args.lm else ["greedy"])
        decoders = {name: make_decoder(name, args, model.charset) for name in names}
    except (FileNotFoundError, ValueError) as error:
        print(f"tfnhr evaluate: error: {error}", file=sys.stderr)
        return 2
    scores = column_scores(model, data.images)
    rows, transcriptions = evaluate(scores, data.texts, decoders)
    print(f"{args.model} on {len(data)} {args.subset} {args.kind} of {args.data}")
    print(format_table(rows))
    for reference, *hypotheses in list(zip(data.texts, *transcriptions.values()))[:args.show]:
        print(f"\n  reference: {reference}")
        for name, hypothesis in zip(transcriptions, hypotheses):
            print(f"  {name:>9}: {hypothesis}")
    if args.json:
        args.json.write_text(json.dumps([row.__dict__ for row in rows], indent=1) + "\n")
    return 0
