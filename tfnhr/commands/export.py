"""``tfnhr export``: a trained recognizer as a SavedModel that TF Serving, other languages' TensorFlow
bindings or a plain ``tf.saved_model.load`` run without tfnhr (see :mod:`tfnhr.serving.export`)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from tfnhr.commands.common import USER_ERRORS, reports_errors
from tfnhr.config.options import DefaultsHelpFormatter
from tfnhr.config.ranges import COUNT

EXPORT_DECODERS = ("greedy",)
"""Decoders an export can hold: the best path (beam search and the LM run in Python only)."""


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``export`` to the ``tfnhr`` sub-commands."""
    parser = commands.add_parser(
        "export", help="write a trained model as a SavedModel for TF Serving (no tfnhr needed to run it)",
        description="Write a trained recognizer as a TensorFlow SavedModel that TF Serving, other languages' "
                    "TensorFlow bindings or a plain tf.saved_model.load run without tfnhr: OUT/VERSION/saved_model.pb "
                    "with the signatures recognize (encoded images -> text, confidence; also serving_default), "
                    "scores (ink images -> column logits) and charset. See docs/export.md.",
        formatter_class=DefaultsHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a saved model (best.keras)")
    parser.add_argument("--out", type=Path, required=True,
                        help="the model's base folder (TF Serving's --model_base_path); the export goes into "
                             "a numbered version folder inside it")
    parser.add_argument("--version", type=COUNT.type, default=None,
                        help="version folder number; unset: one more than the highest in --out, 1 in a new one")
    parser.add_argument("--decoder", choices=EXPORT_DECODERS, default="greedy",
                        help="decoding inside the export (best path; beam search and LMs are not exported)")
    parser.set_defaults(run=run)


@reports_errors("export", USER_ERRORS + (FileExistsError,))
def run(args: argparse.Namespace) -> int:
    """Export and print a JSON summary (the folder written, its signatures, seconds)."""
    from tfnhr.serving.export import SIGNATURES, export_recognizer, next_version
    from tfnhr.models import load_recognizer

    target = args.out / str(args.version or next_version(args.out))
    if target.exists():  # before the model loads: seconds earlier
        raise FileExistsError(f"{target} exists already: choose another --version or remove it")
    started = time.monotonic()
    model = load_recognizer(args.model)
    written = export_recognizer(model, args.out, int(target.name))
    print(json.dumps({"export": str(written), "signatures": list(SIGNATURES), "decoder": args.decoder,
                      "input_height": model.input_height, "stroke_spacing": model.stroke_spacing,
                      "classes": model.charset.num_classes,
                      "seconds": round(time.monotonic() - started, 1)}, indent=1))
    return 0
