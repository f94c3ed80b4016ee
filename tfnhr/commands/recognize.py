"""``tfnhr recognize``: print the text of image files (PNG/JPEG) with a trained recognizer."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tfnhr.commands.common import add_decoder_choice, decoder_from_args, reports_errors


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``recognize`` to the ``tfnhr`` sub-commands."""
    parser = commands.add_parser(
        "recognize", help="print the text of images", description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("images", nargs="+", type=Path, metavar="IMAGE", help="text-line or word images")
    parser.add_argument("--model", type=Path, required=True, help="a saved model (best.keras)")
    add_decoder_choice(parser)
    parser.set_defaults(run=run)


@reports_errors("recognize")
def run(args: argparse.Namespace) -> int:
    """Print ``PATH<TAB>text<TAB>confidence`` per image; unreadable files are reported on stderr
    and make the exit status 1 (the other images are still recognized)."""
    from tfnhr.data.images import ImageReadError, load_gray
    from tfnhr.inference import Transcriber
    from tfnhr.models import load_recognizer

    model = load_recognizer(args.model)
    transcriber = Transcriber(model, decoder_from_args(args.decoder, args, model.charset))
    grays, paths, failed = [], [], 0
    for path in args.images:
        try:
            grays.append(load_gray(path))
            paths.append(path)
        except ImageReadError as error:
            print(f"tfnhr recognize: {error}", file=sys.stderr)
            failed += 1
    for path, (text, confidence) in zip(paths, transcriber.recognize(grays) if grays else []):
        print(f"{path}\t{text}\t{confidence:.3f}")
    return 1 if failed else 0
