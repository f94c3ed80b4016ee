"""``tfnhr recognize``: print the text of image files (PNG/JPEG) with a trained recognizer."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``recognize`` to the ``tfnhr`` sub-commands."""
    from tfnhr.commands.evaluate import add_decoder_choice

    parser = commands.add_parser(
        "recognize", help="print the text of images", description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("images", nargs="+", type=Path, metavar="IMAGE", help="text-line or word images")
    parser.add_argument("--model", type=Path, required=True, help="a saved model (best.keras)")
    add_decoder_choice(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print ``PATH<TAB>text<TAB>confidence`` per image; unreadable files are reported on stderr
    and make the exit status 1 (the other images are still recognized)."""
    from tfnhr.commands.evaluate import make_decoder
    from tfnhr.data.images import ImageReadError, load_gray
    from tfnhr.evaluation import column_scores, confidence
    from tfnhr.model import load_recognizer

    try:
        model = load_recognizer(args.model)
        decode = make_decoder(args.decoder or ("beam+lm" if args.lm else "greedy"), args, model.charset)
    except (FileNotFoundError, ValueError) as error:
        print(f"tfnhr recognize: error: {error}", file=sys.stderr)
        return 2
    grays, paths, failed = [], [], 0
    for path in args.images:
        try:
            grays.append(load_gray(path))
            paths.append(path)
        except ImageReadError as error:
            print(f"tfnhr recognize: {error}", file=sys.stderr)
            failed += 1
    if grays:
        scores = column_scores(model, grays)
        for path, text, example_scores in zip(paths, decode(scores), scores):
            print(f"{path}\t{text}\t{confidence(example_scores):.3f}")
    return 1 if failed else 0
